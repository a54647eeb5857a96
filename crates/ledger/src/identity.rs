//! Who runs a tool, taken from the system, never typed (contract §12): the login user where
//! the kernel records one (the audit login uid, which survives `sudo` and `su`), else the real
//! user id; by name where the user database has one, else as `uid N`.

/// The audit subsystem's "no login uid" (`(uid_t)-1`): a process started outside a login
/// session (a container, a systemd service).
const NO_LOGIN_UID: u32 = u32::MAX;

/// The person this process acts for, by name (`alice`), as the history records it.
pub fn operator() -> String {
    let uid = login_uid().unwrap_or_else(real_uid);
    user_name(uid).unwrap_or_else(|| format!("uid {uid}"))
}

/// The user this process runs as (its effective uid), by name: what an error about a file it
/// cannot open says.
pub fn running_as() -> String {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    user_name(uid).unwrap_or_else(|| format!("uid {uid}"))
}

fn login_uid() -> Option<u32> {
    let text = std::fs::read_to_string("/proc/self/loginuid").ok()?;
    text.trim().parse().ok().filter(|&uid| uid != NO_LOGIN_UID)
}

fn real_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// The name of `uid` in the user database (getpwuid_r: NSS included).
pub fn user_name(uid: u32) -> Option<String> {
    let mut buf = vec![0 as libc::c_char; 4096];
    // SAFETY: an all-zero passwd is a valid value for getpwuid_r to fill in.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer names memory we own for the length given; getpwuid_r writes only
    // there, and `out` is either null or `&mut pwd`, whose strings point into `buf`.
    let r = unsafe { libc::getpwuid_r(uid, &mut pwd, buf.as_mut_ptr(), buf.len(), &mut out) };
    if r != 0 || out.is_null() || pwd.pw_name.is_null() {
        return None;
    }
    // SAFETY: pw_name is a NUL-terminated string inside `buf`, alive here.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) };
    Some(name.to_string_lossy().into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_is_named_and_an_unknown_uid_is_not() {
        assert_eq!(user_name(0).as_deref(), Some("root"));
        assert_eq!(user_name(4_000_000_000), None);
        assert!(!operator().is_empty());
        assert!(!running_as().is_empty());
    }
}

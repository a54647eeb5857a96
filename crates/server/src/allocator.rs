//! The C allocator's settings for a relay process: glibc gives freed memory back to the
//! kernel (`madvise`) whenever the free space at the top of a heap passes its trim
//! threshold (128 KiB by default). SQLite's statement savepoints free and allocate about
//! 20 KiB per statement on the ledger writer thread, so a heap whose top sits near the
//! threshold gave memory back and faulted it in again for every statement: `madvise`, page
//! faults and TLB shoot-downs to the other CPU were up to 7 % of the relay's CPU at 64
//! connections. A higher threshold keeps that memory (at most `TRIM_THRESHOLD` per heap).

/// Free space a heap keeps at its top before glibc gives it back to the kernel.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_THRESHOLD: libc::c_int = 8 << 20;

/// Allocations from this size on are mapped on their own (glibc's dynamic adjustment of
/// this threshold stops once the trim threshold is set, so it is set too).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 1 << 20;

/// Sets the allocator's thresholds for the whole process (once is enough; again is harmless).
pub(super) fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes glibc malloc's tunables; it is thread-safe.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}

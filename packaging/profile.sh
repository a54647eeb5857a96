# /etc/profile.d/txrelay.sh (package txrelay): the tools in /opt/txrelay/bin on login
# shells' PATH, after the system's own (a tool named like a system command does not hide
# it). Their man pages need no PATH: they are in /usr/share/man/man1 (relay.1txrelay, ...).
case ":$PATH:" in
*:/opt/txrelay/bin:*) ;;
*) PATH="$PATH:/opt/txrelay/bin" ;;
esac

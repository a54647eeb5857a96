# /etc/profile.d/txrelay.sh (package txrelay): the tools in /opt/txrelay/bin on login
# shells' PATH, after the system's own (a tool named like a system command does not hide
# it); man(1) then finds their pages in /opt/txrelay/share/man.
case ":$PATH:" in
*:/opt/txrelay/bin:*) ;;
*) PATH="$PATH:/opt/txrelay/bin" ;;
esac

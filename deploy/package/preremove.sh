#!/bin/sh
# Before removing: stop the service (its data in /var/lib/netloom stays).
set -e
if [ -d /run/systemd/system ]; then
	systemctl stop netloom.service >/dev/null 2>&1 || true
fi
exit 0

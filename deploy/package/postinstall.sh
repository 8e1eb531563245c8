#!/bin/sh
# After installing: the netloom system user, its state folder, and the
# systemd and udev rules reloaded (where they run).
set -e
if ! getent group netloom >/dev/null; then
	addgroup --system netloom >/dev/null
fi
if ! getent passwd netloom >/dev/null; then
	adduser --system --ingroup netloom --home /var/lib/netloom --no-create-home \
		--gecos "Netloom fabric monitor" --shell /usr/sbin/nologin netloom >/dev/null
fi
install -d -o netloom -g netloom -m 0750 /var/lib/netloom
chgrp netloom /etc/netloom/netloom.yaml && chmod 0640 /etc/netloom/netloom.yaml
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
if command -v udevadm >/dev/null && [ -d /run/udev ]; then
	udevadm control --reload-rules >/dev/null 2>&1 || true
	udevadm trigger --subsystem-match=infiniband_mad >/dev/null 2>&1 || true
fi
exit 0

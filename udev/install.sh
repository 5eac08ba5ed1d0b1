#!/usr/bin/env bash
# Installs TagFix's udev rules and the modprobe blacklist, reloads udev, and unloads the kernel's
# NFC modules. Run as root; idempotent. See hardware.md#installing-the-udev-rules.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "$(id -u)" -ne 0 ]; then
    echo "error: run as root (sudo $0)" >&2
    exit 1
fi
install -m 0644 "$here/60-tagfix.rules" /etc/udev/rules.d/60-tagfix.rules
install -m 0644 "$here/blacklist-libnfc.conf" /etc/modprobe.d/blacklist-libnfc.conf
if command -v udevadm >/dev/null 2>&1; then
    udevadm control --reload-rules
    udevadm trigger --subsystem-match=usb --subsystem-match=tty
fi
for module in pn533_usb pn533 nfc; do
    modprobe -r "$module" 2>/dev/null || true
done
getent group plugdev >/dev/null || groupadd --system plugdev
echo "installed. Add yourself to the groups: sudo usermod -aG plugdev,dialout \$USER (then log in again)"

# Shared by scripts/demo and scripts/test. Sourced, not run.
set -euo pipefail

# The Debian packages TagFix needs to build and test. Each later layer (libnfc, gpsd…) adds its
# own here, so the two README commands stay the whole set-up.
#   libnfc-dev, pkg-config  build: the CNFC system library (libnfc 1.8.0)
#   libnfc-bin, libnfc-examples  tests: nfc-list and nfc-mfultralight against the PN532 emulator
#   python3-venv  tests: a virtualenv for nfcpy (PyPI), the independent PN532 client
#   libgps-dev    build: the CGPS system library (libgps 3.22)
#   gpsd, gpsd-clients  tests and demo: a private gpsd reading the NMEA emulator; gpspipe
#   libsqlite3-dev  build: the CSQLite system library (the registry of tag placements)
#   libssl-dev    build: the CCrypto system library (OpenSSL 3 libcrypto: trust checks)
#   faketime      tests: a wrong wall clock (with DONT_FAKE_MONOTONIC=1) around tagfix
#   chromium, chromium-driver  tests: tagfix serve's live page in a real browser (Selenium, PyPI)
#   libpq-dev     build: the CPostgres system library (libpq 15: the fleet store on PostgreSQL)
#   postgresql    tests: a private cluster per test (initdb, postgres on a free loopback port)
TAGFIX_DEBIAN_PACKAGES=(libnfc-dev pkg-config libnfc-bin libnfc-examples python3-venv libgps-dev gpsd gpsd-clients libsqlite3-dev libssl-dev faketime mosquitto libmosquitto-dev mosquitto-clients libpcsclite-dev pcscd vsmartcard-vpcd pcsc-tools python3-pyscard
    chromium chromium-driver libjs-leaflet libpq-dev postgresql)

tagfix_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

# Finds the Swift toolchain: on PATH, or in /opt/swift where the Debian images keep it.
tagfix_find_swift() {
    if ! command -v swift >/dev/null 2>&1 && [ -x /opt/swift/usr/bin/swift ]; then
        export PATH="/opt/swift/usr/bin:$PATH"
    fi
    command -v swift >/dev/null 2>&1 || {
        echo "error: no Swift toolchain found (install Swift 6 and put it on PATH)" >&2
        exit 1
    }
}

# Installs the packages that are missing, non-interactively. Idempotent: nothing happens when
# everything is there.
tagfix_install_packages() {
    local missing=()
    local package
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    echo "installing Debian packages: ${missing[*]}" >&2
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || {
            echo "error: need root to install ${missing[*]} (run: apt-get install -y ${missing[*]})" >&2
            exit 1
        }
        sudo="sudo"
    fi
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

# A virtualenv with nfcpy for the interop tests (test tooling only, never the product). Sets
# TAGFIX_NFCPY_PYTHON when it is ready; without PyPI the interop tests are skipped, with a message.
tagfix_interop_venv() {
    local venv=".build/interop-venv"
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import nfc" 2>/dev/null; then
        python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q "nfcpy==1.0.4" >&2 || {
            echo "note: could not install nfcpy from PyPI; the nfcpy interop tests will be skipped" >&2
            return 0
        }
    fi
    export TAGFIX_NFCPY_PYTHON="$PWD/$venv/bin/python"
}

# A virtualenv with Selenium for the browser test of tagfix serve's live page (test tooling only).
# Sets TAGFIX_SELENIUM_PYTHON when it is ready; without PyPI the browser test is skipped, with a
# message.
tagfix_browser_venv() {
    local venv=".build/browser-venv"
    if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import selenium" 2>/dev/null; then
        python3 -m venv "$venv" >&2 && "$venv/bin/pip" install -q "selenium==4.27.1" >&2 || {
            echo "note: could not install Selenium from PyPI; the browser test will be skipped" >&2
            return 0
        }
    fi
    export TAGFIX_SELENIUM_PYTHON="$PWD/$venv/bin/python"
}

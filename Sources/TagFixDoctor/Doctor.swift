import Foundation
import TagFixCore
import TagFixDevices
public import TagFixGPSD
import TagFixNFC
import TagFixPCSC

/// One thing the doctor found.
public struct Finding: Sendable, Hashable {
    public enum Severity: Int, Sendable, Hashable, Comparable {
        case ok, info, warning, blocking
        public static func < (a: Severity, b: Severity) -> Bool { a.rawValue < b.rawValue }

        public var symbol: String {
            switch self {
            case .ok: "✓"
            case .info: "·"
            case .warning: "!"
            case .blocking: "✗"
            }
        }
    }

    public var severity: Severity
    /// A stable id for scripts and tests, e.g. `kernel-module-holds-reader`.
    public var code: String
    public var message: String
    /// What to do about it.
    public var fix: String?
}

/// What opening the reader named by --reader gave.
struct ReaderProbe: Sendable, Hashable {
    var connstring: String
    /// The reader's name when it opened, else why it did not.
    var opened: String?
    var failure: String?
}

/// The doctor's checks: facts in, findings out. Pure, so each check is tested on faked systems.
public enum Doctor {
    static let modulesFix =
        "sudo udev/install.sh (installs udev/blacklist-libnfc.conf and unloads pn533_usb pn533 nfc), or: sudo modprobe -r pn533_usb pn533 nfc; see hardware.md#kernel-modules"

    static let timeFix =
        "set the clock from the receiver: sudo apt-get install chrony, add 'refclock SHM 0 refid GPS precision 1e-1 offset 0.0 delay 0.2' to /etc/chrony/conf.d/gpsd.conf, sudo systemctl restart chrony gpsd; see hardware.md#time"

    /// Looks at this system (below `root`), opens `reader` if given, asks `gps` if given, and
    /// says what it found (`tagfix doctor`).
    public static func examine(root: String, reader: String?, gps: GPSDEndpoint?, gpsWait: Duration) async -> [Finding] {
        var facts = SystemFacts.read(root: root)
        var probe: ReaderProbe?
        if let reader {
            switch await LibNFC.probe(reader) {
            case .success(let name): probe = ReaderProbe(connstring: reader, opened: name)
            case .failure(let error): probe = ReaderProbe(connstring: reader, failure: error.description)
            }
        }
        var gpsResult = GPSProbe.notAsked
        if let gps { gpsResult = await gps.probe(wait: gpsWait) }
        facts.clockSynchronised = KernelClock().read().synchronised
        // pcscd is asked about this system only, not about a copied tree.
        if root == "/", case .success(let names) = await PCSC.readers() { facts.pcscReaders = names }
        var systemMinusGPS: Duration?
        if case .fix(_, let fix) = gpsResult {
            var watch = ClockWatch(systemClock: KernelClock())
            _ = watch.observe(fix, axisNow: MonotonicClock().now)
            systemMinusGPS = watch.reference.systemMinusGPS
        }
        return check(facts, libnfc: LibNFC.version, reader: probe, gps: gpsResult, systemMinusGPS: systemMinusGPS)
    }

    static func check(
        _ facts: SystemFacts, libnfc: String?, reader: ReaderProbe?, gps: GPSProbe, systemMinusGPS: Duration? = nil
    ) -> [Finding] {
        var checkup = Checkup(facts: facts, reader: reader)
        checkup.libnfc(libnfc)
        checkup.usb()
        checkup.kernelModules()
        checkup.pcsc()
        checkup.piUART()
        checkup.readerPresence()
        checkup.readerOpens()
        checkup.gpsd(gps)
        checkup.clock(systemMinusGPS: systemMinusGPS)
        return checkup.findings
    }
}

/// The findings so far, and the checks that add to them, one per heading of the doctor's output.
private struct Checkup {
    let facts: SystemFacts
    let reader: ReaderProbe?
    var findings: [Finding] = []
    /// Readers (and serial bridges, and a usable Pi UART) seen so far.
    var readers = 0

    var user: UserIdentity { facts.user }
    var modulesFix: String { Doctor.modulesFix }
    var timeFix: String { Doctor.timeFix }

    init(facts: SystemFacts, reader: ReaderProbe?) {
        self.facts = facts
        self.reader = reader
    }

    mutating func add(_ severity: Finding.Severity, _ code: String, _ message: String, fix: String? = nil) {
        findings.append(Finding(severity: severity, code: code, message: message, fix: fix))
    }

    func accessFix(_ node: NodeFacts, wanted group: String) -> String {
        let nodeGroup = facts.groupName(node.group)
        if nodeGroup == group || facts.udevRulesInstalled {
            return "sudo usermod -aG \(group) \(user.name), then log out and in again (\(node.path) belongs to group \(nodeGroup))"
        }
        return
            "install the udev rules: sudo udev/install.sh, then replug the device and add yourself to \(group): sudo usermod -aG \(group) \(user.name); see hardware.md#installing-the-udev-rules"
    }

    /// libnfc itself.
    mutating func libnfc(_ libnfc: String?) {
        if let libnfc {
            add(.ok, "libnfc", "libnfc \(libnfc)\(facts.libnfcConfig.map { ", configured in \($0)" } ?? "")")
        } else {
            add(.blocking, "libnfc-missing", "libnfc is not installed", fix: "sudo apt-get install libnfc6 libnfc-bin")
        }
    }

    /// USB readers, bridges and receivers.
    mutating func usb() {
        for device in facts.usb {
            guard let known = KnownDevice.all.first(where: { $0.vendor == device.vendor && $0.product == device.product }) else { continue }
            let id = "\(device.vendor):\(device.product)"
            switch known.kind {
            case .nfcReader(let driver):
                readers += 1
                if let module = device.drivers.first(where: KnownDevice.kernelNFCModules.contains) {
                    add(
                        .blocking, "kernel-module-holds-reader", "reader busy: the \(module) kernel module holds \(id) (\(known.name))",
                        fix: modulesFix)
                    continue
                }
                if known.product == "2200", facts.processes.contains("pcscd") {
                    add(
                        .blocking, "pcscd-holds-reader", "reader busy: pcscd (the PC/SC daemon) holds \(id) (\(known.name))",
                        fix:
                            "read it through pcscd: --reader pcsc: (see hardware.md#pcsc-readers); or, for libnfc, sudo systemctl stop pcscd.socket pcscd (and disable them for good), then --reader acr122_usb:"
                    )
                    continue
                }
                guard device.node.accessible(by: user) else {
                    add(
                        .blocking, "reader-not-accessible",
                        "\(known.name) (\(id)) is present but \(user.name) cannot open \(device.node.path)",
                        fix: accessFix(device.node, wanted: "plugdev"))
                    continue
                }
                add(.ok, "reader", "\(known.name) (\(id)): --reader \(driver):\(String(format: "%03d:%03d", device.bus, device.address))")
            case .pcscReader:
                readers += 1
                if let module = device.drivers.first(where: KnownDevice.kernelNFCModules.contains) {
                    add(
                        .blocking, "kernel-module-holds-reader", "reader busy: the \(module) kernel module holds \(id) (\(known.name))",
                        fix: modulesFix)
                    continue
                }
                guard facts.processes.contains("pcscd") else {
                    add(
                        .blocking, "pcscd-not-running", "\(known.name) (\(id)) is a PC/SC reader, and pcscd does not run",
                        fix: "sudo apt-get install pcscd libccid && sudo systemctl enable --now pcscd.socket; see hardware.md#pcsc-readers")
                    continue
                }
                add(.ok, "pcsc-reader", "\(known.name) (\(id)) through pcscd: --reader pcsc:\(known.name)")
            case .serialBridge, .gps:
                let isGPS = known.kind == .gps
                if !isGPS { readers += 1 }
                guard let tty = device.ttys.first else {
                    add(
                        .warning, "no-serial-port", "\(known.name) (\(id)) has no serial port",
                        fix:
                            "its kernel driver is missing or not loaded (drivers bound: \(device.drivers.isEmpty ? "none" : device.drivers.joined(separator: ", ")))"
                    )
                    continue
                }
                guard tty.accessible(by: user) else {
                    add(
                        .blocking, "serial-not-accessible", "\(user.name) cannot open \(tty.path) (\(known.name), \(id))",
                        fix: accessFix(tty, wanted: "dialout"))
                    continue
                }
                add(
                    .ok, isGPS ? "gps-receiver" : "serial-bridge",
                    isGPS
                        ? "\(known.name) at \(tty.path): point gpsd at it (DEVICES=\"\(tty.path)\" in /etc/default/gpsd)"
                        : "\(known.name) at \(tty.path): a PN532 board? --reader pn532_uart:\(tty.path)")
            }
        }
    }

    /// The kernel's NFC stack.
    mutating func kernelModules() {
        let loaded = KnownDevice.kernelNFCModules.filter(facts.loadedModules.contains)
        if !loaded.isEmpty, !findings.contains(where: { $0.code == "kernel-module-holds-reader" }) {
            add(
                .warning, "kernel-modules-loaded",
                "the kernel's NFC modules are loaded (\(loaded.joined(separator: ", "))): they claim PN533, SCL3711 and ACR122U readers when plugged in",
                fix: modulesFix)
        }
    }

    /// pcscd and the readers it has.
    mutating func pcsc() {
        if let names = facts.pcscReaders, !names.isEmpty {
            add(.ok, "pcsc-readers", "pcscd has \(names.map { "pcsc:\($0)" }.joined(separator: ", "))")
            return
        }
        let pcscPresent = facts.usb.contains { device in
            KnownDevice.all.contains { $0.vendor == device.vendor && $0.product == device.product && $0.kind == .pcscReader }
        }
        if pcscPresent, facts.processes.contains("pcscd"), facts.pcscReaders != nil {
            add(
                .warning, "pcscd-no-reader", "pcscd runs but has no reader",
                fix:
                    "its CCID driver may be missing (sudo apt-get install libccid), or a kernel NFC module holds the reader (\(modulesFix)); then sudo systemctl restart pcscd"
            )
        }
    }

    /// The Raspberry Pi's UART.
    mutating func piUART() {
        if let model = facts.boardModel, model.contains("Raspberry Pi") {
            let console = facts.kernelCommandLine.split(separator: " ").first { part in
                ["console=serial0", "console=ttyAMA0", "console=ttyS0"].contains { part.hasPrefix($0) }
            }
            let uartReader = reader.map { probe in ["serial0", "ttyAMA0", "ttyS0"].contains { probe.connstring.contains($0) } } ?? true
            if let console {
                add(
                    uartReader ? .blocking : .warning, "serial-console-on-uart",
                    "the kernel's serial console (\(console)) is on the UART a PN532 would be wired to",
                    fix:
                        "sudo raspi-config → Interface Options → Serial Port: login shell No, hardware Yes (or remove \(console) from /boot/firmware/cmdline.txt), then reboot; see hardware.md#wiring-a-pn532-to-a-raspberry-pi"
                )
            }
            if let serial0 = facts.serial0 {
                if !serial0.exists {
                    add(
                        .warning, "uart-disabled", "\(model): /dev/serial0 does not exist",
                        fix: "add enable_uart=1 to /boot/firmware/config.txt and reboot")
                } else if !serial0.accessible(by: user) {
                    add(
                        .blocking, "serial-not-accessible", "\(user.name) cannot open /dev/serial0",
                        fix: accessFix(serial0, wanted: "dialout"))
                } else {
                    readers += 1
                    add(.ok, "uart", "\(model): a PN532 on the UART: --reader pn532_uart:/dev/serial0")
                }
            }
        }
    }

    /// No reader at all; the udev rules.
    mutating func readerPresence() {
        if readers == 0, reader == nil {
            add(
                .warning, "no-reader", "no NFC reader found (USB readers, USB-serial bridges)",
                fix: "plug the reader in; for a lab without one: tagfix emulate pn532 --tag DUMP --link /tmp/pn532; see hardware.md#readers"
            )
        }
        if !facts.udevRulesInstalled,
            facts.usb.contains(where: { d in KnownDevice.all.contains { $0.vendor == d.vendor && $0.product == d.product } })
        {
            add(
                .info, "udev-rules", "TagFix's udev rules are not installed (stable /dev/nfc-* and /dev/gps-* names)",
                fix: "sudo udev/install.sh")
        }
    }

    /// The reader asked for.
    mutating func readerOpens() {
        if let reader {
            if let name = reader.opened {
                add(.ok, "reader-opens", "\(reader.connstring) opens: \(name)")
            } else {
                let why = reader.failure ?? "unknown error"
                add(
                    .blocking, "reader-does-not-open", "\(reader.connstring) does not open: \(why)",
                    fix: "check the connstring (tagfix devices lists what libnfc finds), the wiring and the findings above")
            }
        }
    }

    /// gpsd.
    mutating func gpsd(_ gps: GPSProbe) {
        let gpsdRunning = facts.processes.contains("gpsd")
        switch gps {
        case .notAsked: break
        case .unreachable(let endpoint, let why):
            // What is known: nothing answers at the endpoint. A gpsd process on this machine may
            // listen elsewhere (another port, a private gpsd); it is no evidence this one runs.
            if gpsdRunning {
                add(
                    .blocking, "gpsd-unreachable", "gpsd at \(endpoint) does not answer (\(why))",
                    fix:
                        "a gpsd runs on this machine, but not at that address: check --gps (gpsd listens on localhost:2947 unless started with -S PORT or -G), or start it: sudo systemctl start gpsd; see hardware.md#gpsd"
                )
            } else {
                add(
                    .blocking, "gpsd-not-running", "gpsd is not running (nothing answers at \(endpoint): \(why))",
                    fix:
                        "start it: sudo systemctl start gpsd (install it with sudo apt-get install gpsd, and set DEVICES=\"/dev/gps-ublox\" or your receiver in /etc/default/gpsd); see hardware.md#gpsd"
                )
            }
        case .silent(let endpoint):
            add(
                .blocking, "gpsd-no-device",
                "gpsd at \(endpoint) answers but reports nothing: it has no receiver, or the receiver is silent",
                fix:
                    "plug the receiver in and check DEVICES in /etc/default/gpsd (gpsctl -l lists what gpsd sees); see hardware.md#gps-receivers"
            )
        case .noFix(let endpoint, let device):
            add(
                .warning, "gps-no-fix", "gpsd at \(endpoint) reads \(device ?? "a receiver") but has no fix yet",
                fix: "take the receiver outdoors with open sky and wait (a cold start takes up to a minute or more)")
        case .fix(let endpoint, let fix):
            let accuracy = fix.horizontalAccuracy.map { " ±\(Coordinate.format($0, 1)) m" } ?? ""
            let satellites = fix.satellitesUsed.map { ", \($0) satellites" } ?? ""
            add(
                .ok, "gps-fix",
                "gpsd at \(endpoint): \(fix.mode == .threeD ? "3D" : "2D") fix\(accuracy)\(satellites)\(fix.device.map { " from \($0)" } ?? "")"
            )
        }
    }

    /// Time: which clock stamps verdicts (see docs/verifier.md#time).
    mutating func clock(systemMinusGPS: Duration?) {
        if let difference = systemMinusGPS, difference > TimeReference.agreement || difference < .zero - TimeReference.agreement {
            add(
                .warning, "clock-off", "\(TimeReference.describe(systemMinusGPS: difference)): verdicts are stamped with GPS time",
                fix: timeFix)
        } else if facts.clockSynchronised == true {
            add(
                .ok, "clock-synchronised",
                "the system clock is synchronised\(systemMinusGPS.map { " and agrees with GPS time (\(Coordinate.format($0.seconds, 2)) s)" } ?? "")"
            )
        } else {
            add(
                .warning, "clock-unsynchronised",
                "the system clock is not synchronised\(facts.chronyConfigured && !facts.chronyGPSRefclock ? " (chrony has no GPS refclock)" : ""): TagFix stamps verdicts with GPS time once it has a fix",
                fix: timeFix)
        }
    }
}

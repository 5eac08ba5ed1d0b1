import Foundation
import TagFixCore
import TagFixDaemons
import TagFixDevices
import TagFixEmulators
import TagFixGPSD
import TagFixTesting
import Testing

@testable import TagFixCLI
@testable import TagFixDoctor

/// A faked system below a temporary root: /etc/group, /proc, /sys/bus/usb, /dev.
struct FakeSystem {
    let root: String
    /// The group id the fake's device nodes get (the test process's own group).
    let gid = getgid()

    init() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("tagfix-root-\(UUID().uuidString)").path
        try write("etc/group", "root:x:0:\nplugdev:x:\(getgid() == 0 ? 46 : getgid()):\ndialout:x:20:\n")
    }

    func write(_ relative: String, _ text: String) throws {
        let path = (root as NSString).appendingPathComponent(relative)
        try FileManager.default.createDirectory(atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try text.write(toFile: path, atomically: false, encoding: .utf8)
    }

    /// A device node (a plain file) with `mode`; its group is named `group` in /etc/group.
    func node(_ relative: String, mode: mode_t, group: String) throws {
        try write(relative, "")
        chmod((root as NSString).appendingPathComponent(relative), mode)
        // Name the node's actual group as asked, so the test needs no chown.
        let lines = try String(contentsOfFile: root + "/etc/group", encoding: .utf8).split(separator: "\n").filter {
            !$0.hasPrefix("\(group):") && !$0.hasSuffix(":\(gid):")
        }
        try write("etc/group", (lines + ["\(group):x:\(gid):"]).joined(separator: "\n") + "\n")
    }

    func usb(
        _ name: String, vendor: String, product: String, bus: Int, address: Int, driver: String? = nil, tty: String? = nil,
        ttyInSubfolder: Bool = false
    ) throws {
        let base = "sys/bus/usb/devices/\(name)"
        try write("\(base)/idVendor", vendor + "\n")
        try write("\(base)/idProduct", product + "\n")
        try write("\(base)/busnum", "\(bus)\n")
        try write("\(base)/devnum", "\(address)\n")
        let interface = root + "/sys/bus/usb/devices/\(name):1.0"
        try FileManager.default.createDirectory(atPath: interface, withIntermediateDirectories: true)
        if let driver {
            try FileManager.default.createSymbolicLink(
                atPath: interface + "/driver", withDestinationPath: "../../../../bus/usb/drivers/\(driver)")
        }
        if let tty {
            try FileManager.default.createDirectory(
                atPath: interface + (ttyInSubfolder ? "/tty/\(tty)" : "/\(tty)"), withIntermediateDirectories: true)
        }
    }

    func facts(userInGroups groups: [String] = []) throws -> SystemFacts {
        var facts = SystemFacts.read(root: root, user: UserIdentity(name: "tech", uid: 4242, groups: []))
        facts.user.groups = Set(groups.compactMap { facts.groupID($0) })
        facts.clockSynchronised = true  // a faked system's clock is right unless a test says otherwise
        return facts
    }
}

private func codes(_ findings: [Finding], _ severity: Finding.Severity) -> [String] {
    findings.filter { $0.severity == severity }.map(\.code)
}

@Suite("tagfix doctor on faked systems")
struct DoctorTests {
    static func check(_ facts: SystemFacts, reader: ReaderProbe? = nil) -> [Finding] {
        Doctor.check(facts, libnfc: "1.8.0", reader: reader, gps: .notAsked)
    }

    @Test("an ACR122U held by the pn533_usb kernel module: blocking, with the blacklist fix")
    func kernelModuleHoldsReader() throws {
        let system = try FakeSystem()
        try system.write("proc/modules", "pn533_usb 28672 0 - Live 0x0\npn533 45056 1 pn533_usb, Live 0x0\nnfc 131072 1 pn533, Live 0x0\n")
        try system.usb("1-1", vendor: "072f", product: "2200", bus: 1, address: 5, driver: "pn533_usb")
        try system.node("dev/bus/usb/001/005", mode: 0o664, group: "plugdev")
        let findings = Self.check(try system.facts(userInGroups: ["plugdev"]))
        let finding = try #require(findings.first { $0.code == "kernel-module-holds-reader" })
        #expect(finding.severity == .blocking)
        #expect(finding.message == "reader busy: the pn533_usb kernel module holds 072f:2200 (ACS ACR122U)")
        #expect(finding.fix?.contains("hardware.md#kernel-modules") == true)
        #expect(!findings.contains { $0.code == "kernel-modules-loaded" }, "said once")
    }

    @Test(
        "a PC/SC reader: usable through pcscd when it runs, blocking without it or under the kernel's NFC module",
        arguments: [("076b", "5422"), ("072f", "223b"), ("04e6", "5790"), ("072f", "2303"), ("072f", "2308")])
    func pcscReader(_ vendor: String, _ product: String) throws {
        let running = try FakeSystem()
        try running.write("proc/812/comm", "pcscd\n")
        try running.usb("1-3", vendor: vendor, product: product, bus: 1, address: 9)
        try running.node("dev/bus/usb/001/009", mode: 0o664, group: "plugdev")
        var facts = try running.facts(userInGroups: ["plugdev"])
        let ok = try #require(Self.check(facts).first { $0.code == "pcsc-reader" })
        #expect(ok.severity == .ok)
        #expect(ok.message.contains("\(vendor):\(product)") && ok.message.contains("--reader pcsc:"), "\(ok.message)")
        #expect(codes(Self.check(facts), .blocking).isEmpty)
        // pcscd runs and was asked, but has no reader: its driver, or the kernel, is in the way.
        facts.pcscReaders = []
        #expect(Self.check(facts).contains { $0.code == "pcscd-no-reader" && $0.severity == .warning })
        facts.pcscReaders = ["HID Global OMNIKEY 5422 Smartcard Reader [OMNIKEY 5422 Smartcard Reader] 00 00"]
        #expect(Self.check(facts).contains { $0.code == "pcsc-readers" && $0.message.contains("pcsc:HID Global OMNIKEY 5422") })

        let stopped = try FakeSystem()
        try stopped.usb("1-3", vendor: vendor, product: product, bus: 1, address: 9)
        try stopped.node("dev/bus/usb/001/009", mode: 0o664, group: "plugdev")
        let blocking = Self.check(try stopped.facts(userInGroups: ["plugdev"]))
        #expect(codes(blocking, .blocking) == ["pcscd-not-running"])
        #expect(blocking.first { $0.code == "pcscd-not-running" }?.fix?.contains("pcscd.socket") == true)

        let held = try FakeSystem()
        try held.write("proc/812/comm", "pcscd\n")
        try held.usb("1-3", vendor: vendor, product: product, bus: 1, address: 9, driver: "pn533_usb")
        try held.node("dev/bus/usb/001/009", mode: 0o664, group: "plugdev")
        #expect(codes(Self.check(try held.facts(userInGroups: ["plugdev"])), .blocking) == ["kernel-module-holds-reader"])
    }

    @Test("pcscd holding an ACR122U is blocking")
    func pcscd() throws {
        let system = try FakeSystem()
        try system.write("proc/812/comm", "pcscd\n")
        try system.usb("1-2", vendor: "072f", product: "2200", bus: 1, address: 7)
        try system.node("dev/bus/usb/001/007", mode: 0o664, group: "plugdev")
        #expect(codes(Self.check(try system.facts(userInGroups: ["plugdev"])), .blocking) == ["pcscd-holds-reader"])
    }

    @Test(
        "a reader present but not accessible: the fix depends on why",
        arguments: [
            ("plugdev", 0o660 as mode_t, "usermod -aG plugdev"),  // rules installed, user not in the group
            ("root", 0o600 as mode_t, "install the udev rules"),  // no rules: root-owned node
        ])
    func notAccessible(group: String, mode: mode_t, fix: String) throws {
        let system = try FakeSystem()
        try system.usb("3-1", vendor: "04cc", product: "2533", bus: 3, address: 2)
        try system.node("dev/bus/usb/003/002", mode: mode, group: group)
        let finding = try #require(Self.check(try system.facts()).first { $0.code == "reader-not-accessible" })
        #expect(finding.severity == .blocking)
        #expect(finding.fix?.contains(fix) == true, "\(finding.fix ?? "")")
    }

    @Test("an accessible PN533: ok, with its connstring; nothing blocks")
    func accessible() throws {
        let system = try FakeSystem()
        try system.write("etc/udev/rules.d/60-tagfix.rules", "")
        try system.usb("3-1", vendor: "04cc", product: "2533", bus: 3, address: 2)
        try system.node("dev/bus/usb/003/002", mode: 0o664, group: "plugdev")
        let findings = Self.check(try system.facts(userInGroups: ["plugdev"]))
        #expect(codes(findings, .blocking).isEmpty)
        #expect(findings.first { $0.code == "reader" }?.message == "NXP PN533 (04cc:2533): --reader pn53x_usb:003:002")
    }

    @Test("a PN532 board on a CH340 when the user is not in dialout; a u-blox receiver (ttyACM under tty/) that is fine")
    func serialPorts() throws {
        let system = try FakeSystem()
        try system.usb("1-3", vendor: "1a86", product: "7523", bus: 1, address: 9, driver: "ch341", tty: "ttyUSB0")
        try system.node("dev/ttyUSB0", mode: 0o660, group: "dialout")
        try system.usb("1-4", vendor: "1546", product: "01a8", bus: 1, address: 10, driver: "cdc_acm", tty: "ttyACM0", ttyInSubfolder: true)
        try system.write("dev/ttyACM0", "")
        chmod(system.root + "/dev/ttyACM0", 0o666)
        let findings = Self.check(try system.facts())
        let serial = try #require(findings.first { $0.code == "serial-not-accessible" })
        #expect(serial.message.contains("/dev/ttyUSB0"))
        #expect(serial.fix?.contains("usermod -aG dialout tech") == true)
        #expect(findings.first { $0.code == "gps-receiver" }?.message.contains("/dev/ttyACM0") == true)
    }

    @Test("a Raspberry Pi whose serial console sits on the PN532's UART")
    func raspberryPi() throws {
        let system = try FakeSystem()
        try system.write("proc/device-tree/model", "Raspberry Pi 4 Model B Rev 1.4\u{0}")
        try system.write("proc/cmdline", "console=serial0,115200 console=tty1 root=PARTUUID=1 rootwait\n")
        try system.node("dev/serial0", mode: 0o660, group: "dialout")
        let findings = Self.check(
            try system.facts(userInGroups: ["dialout"]), reader: ReaderProbe(connstring: "pn532_uart:/dev/serial0", opened: "PN532"))
        let console = try #require(findings.first { $0.code == "serial-console-on-uart" })
        #expect(console.severity == .blocking)
        #expect(console.message.contains("console=serial0,115200"))
        #expect(console.fix?.contains("raspi-config") == true)
        #expect(!findings.contains { $0.code == "no-reader" }, "the UART counts as a reader")
    }

    @Test("kernel NFC modules loaded with no reader plugged in: a warning, and no reader found")
    func modulesOnly() throws {
        let system = try FakeSystem()
        try system.write("proc/modules", "nfc 131072 0 - Live 0x0\n")
        let findings = Self.check(try system.facts())
        #expect(codes(findings, .warning).sorted() == ["kernel-modules-loaded", "no-reader"])
        #expect(codes(findings, .blocking).isEmpty)
    }

    @Test("the doctor's device list is the udev rules' list")
    func knownDevicesMatchUdev() throws {
        let rules = try String(contentsOfFile: packageRoot + "/udev/60-tagfix.rules", encoding: .utf8)
        func value(_ line: Substring, _ key: String) -> String? {
            guard let range = line.range(of: "ATTRS{\(key)}==\"") else { return nil }
            return String(line[range.upperBound...].prefix(4))
        }
        let pairs = Set(
            rules.split(separator: "\n").filter { !$0.hasPrefix("#") }.compactMap { line -> String? in
                guard let vendor = value(line, "idVendor"), let product = value(line, "idProduct") else { return nil }
                return "\(vendor):\(product)"
            })
        #expect(pairs.count == 20)
        #expect(pairs == Set(KnownDevice.all.map { "\($0.vendor):\($0.product)" }))
    }
}

@Suite("tagfix doctor against real services", .timeLimit(.minutes(2)))
struct DoctorLiveTests {
    @Test(
        "gpsd with a fix, gpsd without one, gpsd with a silent receiver, and no gpsd",
        .enabled(if: PrivateGPSD.installedPath != nil, "gpsd is not installed"))
    func gpsd() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 53.5, longitude: 9.9), noise: 0.5, seed: 1), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let endpoint = try GPSDEndpoint("gpsd://127.0.0.1:\(gpsd.port)")
            guard case .fix = await endpoint.probe(wait: .seconds(20)) else {
                Issue.record("a fix was expected")
                return
            }
            receiver.setFixLost(true)
            // Wait until gpsd itself reports the loss, so no positioned report is still in flight.
            var watch = GPSDFixSource(endpoint: endpoint, clock: MonotonicClock()).events().makeAsyncIterator()
            while let event = await watch.next() {
                if case .fix(let fix) = event, fix.mode == .noFix { break }
            }
            guard case .noFix = await endpoint.probe(wait: .seconds(2)) else {
                Issue.record("no fix was expected")
                return
            }
            let mute = try NMEAEmulator(source: .at(Coordinate(validLatitude: 1, longitude: 1), noise: 1, seed: 1))
            defer { mute.stop() }
            try await PrivateGPSD.with(device: mute.path) { quiet in
                guard case .silent = try await GPSDEndpoint("gpsd://127.0.0.1:\(quiet.port)").probe(wait: .seconds(2)) else {
                    Issue.record("a silent receiver was expected")
                    return
                }
                let result = await run(["doctor", "--gps", "gpsd://127.0.0.1:1", "--root", try FakeSystem().root, "--gps-wait", "2"])
                #expect(result.code == 69)
                #expect(result.out.contains { $0.contains("gpsd is not running") })
            }
        }
    }

    @Test("--reader opens the PN532 emulator through libnfc; a wrong connstring blocks")
    func reader() async throws {
        let tag = try EmulatedType2Tag.ntag(213, message: [])
        let emulator = try PN532Emulator(tags: [tag])
        defer { emulator.stop() }
        let root = try FakeSystem().root
        let good = await run(["doctor", "--reader", "pn532_uart:\(emulator.path)", "--gps", "none", "--root", root, "--json"])
        let findings = try good.out.map { try JSONValue.parse($0) }
        #expect(findings.contains { $0["code"]?.string == "reader-opens" }, "\(good.out)")
        #expect(good.code == 0, "\(good.err)")
        let bad = await run(["doctor", "--reader", "pn532_uart:/dev/nonexistent", "--gps", "none", "--root", root])
        #expect(bad.code == 69)
        #expect(bad.out.contains { $0.contains("does not open") })
    }

    @Test(
        "tagfix devices lists gpsd's receiver beside the reader",
        .enabled(
            if: PrivateGPSD.installedPath != nil && FileManager.default.isExecutableFile(atPath: TestBinaries.tagfix),
            "needs gpsd and the built tagfix"))
    func devices() async throws {
        let receiver = try NMEAEmulator(source: .at(Coordinate(validLatitude: 53.5, longitude: 9.9), noise: 0.5, seed: 1), rate: 5)
        defer { receiver.stop() }
        try await PrivateGPSD.with(device: receiver.path) { gpsd in
            receiver.start()
            let emulator = try PN532Emulator(tags: [try EmulatedType2Tag.ntag(213, message: [])])
            defer { emulator.stop() }
            let result = try await TestProgram.run(
                TestBinaries.tagfix, ["devices", "--gps", "gpsd://127.0.0.1:\(gpsd.port)", "--json"],
                environment: ["LIBNFC_DEVICE": "pn532_uart:\(emulator.path)"], standardError: .standardOutput)
            #expect(result.status == 0, "\(result.output)")
            let line = try #require(result.output.split(separator: "\n").first { $0.hasPrefix("{") })
            let json = try JSONValue.parse(String(line))
            #expect(json["readers"]?.array?.first?.string == "pn532_uart:\(emulator.path)")
            #expect(json["gps"]?.array?.first?["path"]?.string == gpsd.device)
            #expect(json["gps"]?.array?.first?["gps"]?.string == "gpsd://127.0.0.1:\(gpsd.port)\(gpsd.device)")
        }
    }
}

@Suite("tagfix doctor: the system clock")
struct DoctorClockTests {
    static let chronyWithGPS = "pool 2.debian.pool.ntp.org iburst\nrefclock SHM 0 refid GPS precision 1e-1 offset 0.0 delay 0.2\n"
    static let chronyWithoutGPS = "pool 2.debian.pool.ntp.org iburst\n# refclock SHM 0 refid GPS\n"

    @Test(
        "synchronised, unsynchronised (with or without chrony's GPS refclock), or off GPS time: what doctor says",
        arguments: [
            (true as Bool?, nil as Double?, nil as String?, "clock-synchronised", Finding.Severity.ok),
            (false, nil, chronyWithoutGPS, "clock-unsynchronised", .warning), (nil, nil, nil, "clock-unsynchronised", .warning),
            (false, -864_000.2, chronyWithGPS, "clock-off", .warning), (true, 0.3, chronyWithGPS, "clock-synchronised", .ok),
            (true, 94_608_000, chronyWithGPS, "clock-off", .warning),
        ])
    func clock(_ synchronised: Bool?, _ offset: Double?, _ chrony: String?, _ code: String, _ severity: Finding.Severity) throws {
        let system = try FakeSystem()
        if let chrony { try system.write("etc/chrony/chrony.conf", chrony) }
        var facts = try system.facts()
        facts.clockSynchronised = synchronised
        #expect(facts.chronyConfigured == (chrony != nil))
        #expect(facts.chronyGPSRefclock == (chrony == Self.chronyWithGPS))
        let findings = Doctor.check(
            facts, libnfc: "1.8.0", reader: nil, gps: .notAsked, systemMinusGPS: offset.flatMap { .seconds(exactly: $0) })
        let finding = try #require(findings.first { $0.code.hasPrefix("clock-") })
        #expect(finding.code == code)
        #expect(finding.severity == severity)
        if severity == .warning { #expect(finding.fix?.contains("hardware.md#time") == true) }
        if code == "clock-off" { #expect(finding.message.contains(offset! < 0 ? "behind GPS time" : "ahead of GPS time")) }
        if chrony == Self.chronyWithoutGPS { #expect(finding.message.contains("chrony has no GPS refclock")) }
    }
}

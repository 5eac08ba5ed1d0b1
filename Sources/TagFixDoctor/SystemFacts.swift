import Foundation
import TagFixSystem

/// A USB device as a reader or receiver the doctor knows (the same list as udev/60-tagfix.rules;
/// a test keeps the two in step).
struct KnownDevice: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// An NFC reader libnfc drives over USB (`driver` in connstrings).
        case nfcReader(driver: String)
        /// A contactless reader pcscd drives (`--reader pcsc:NAME`), with its CCID driver.
        case pcscReader
        /// A USB-serial bridge, as on PN532 breakout boards.
        case serialBridge
        case gps
    }

    var vendor: String
    var product: String
    var name: String
    var kind: Kind

    static let all: [KnownDevice] = [
        KnownDevice(vendor: "04cc", product: "0531", name: "NXP PN531", kind: .nfcReader(driver: "pn53x_usb")),
        KnownDevice(vendor: "054c", product: "0193", name: "Sony PN531", kind: .nfcReader(driver: "pn53x_usb")),
        KnownDevice(vendor: "04cc", product: "2533", name: "NXP PN533", kind: .nfcReader(driver: "pn53x_usb")),
        KnownDevice(vendor: "04e6", product: "5591", name: "SCM SCL3711", kind: .nfcReader(driver: "pn53x_usb")),
        KnownDevice(vendor: "072f", product: "2200", name: "ACS ACR122U", kind: .nfcReader(driver: "acr122_usb")),
        // PC/SC readers, as Debian 12's CCID driver (libccid 1.5.2) lists them.
        KnownDevice(vendor: "072f", product: "223b", name: "ACS ACR1252", kind: .pcscReader),
        KnownDevice(vendor: "072f", product: "223e", name: "ACS ACR1252", kind: .pcscReader),
        KnownDevice(vendor: "076b", product: "5022", name: "HID Global OMNIKEY 5022", kind: .pcscReader),
        KnownDevice(vendor: "076b", product: "5422", name: "HID Global OMNIKEY 5422", kind: .pcscReader),
        KnownDevice(vendor: "076b", product: "5427", name: "HID OMNIKEY 5427 CK", kind: .pcscReader),
        KnownDevice(vendor: "04e6", product: "5790", name: "Identiv uTrust 3700 F", kind: .pcscReader),
        // ACS ACR1552U: in CCID's readers list since libccid 1.5.3 (2023), not in Debian 12's 1.5.2.
        KnownDevice(vendor: "072f", product: "2303", name: "ACS ACR1552U (1S CL; libccid 1.5.3 or later)", kind: .pcscReader),
        KnownDevice(vendor: "072f", product: "2308", name: "ACS ACR1552U (CL; libccid 1.5.3 or later)", kind: .pcscReader),
        KnownDevice(vendor: "1a86", product: "7523", name: "CH340 USB-serial", kind: .serialBridge),
        KnownDevice(vendor: "10c4", product: "ea60", name: "CP2102 USB-serial", kind: .serialBridge),
        KnownDevice(vendor: "0403", product: "6001", name: "FTDI FT232 USB-serial", kind: .serialBridge),
        KnownDevice(vendor: "1546", product: "01a7", name: "u-blox 7 GPS", kind: .gps),
        KnownDevice(vendor: "1546", product: "01a8", name: "u-blox 8 GPS", kind: .gps),
        KnownDevice(vendor: "1546", product: "01a9", name: "u-blox 9 GPS", kind: .gps),
        KnownDevice(vendor: "067b", product: "2303", name: "Prolific PL2303 (GlobalSat BU-353 and others)", kind: .gps),
    ]

    /// The kernel's NFC modules, which claim the PN53x readers libnfc needs.
    static let kernelNFCModules = ["pn533_usb", "pn533", "port100", "nfc"]
}

/// Who runs the doctor: the checks ask whether this user may open each device.
struct UserIdentity: Sendable, Hashable {
    var name: String
    var uid: UInt32
    var groups: Set<UInt32>

    static var current: UserIdentity {
        var groups = [gid_t](repeating: 0, count: 256)
        let count = getgroups(Int32(groups.count), &groups)
        let name = ProcessInfo.processInfo.environment["USER"] ?? String(getuid())
        return UserIdentity(name: name, uid: getuid(), groups: Set(groups.prefix(max(0, Int(count)))).union([getgid()]))
    }
}

/// A device node: who may open it.
struct NodeFacts: Sendable, Hashable {
    var path: String
    var exists: Bool
    var mode: UInt16 = 0
    var owner: UInt32 = 0
    var group: UInt32 = 0

    /// Whether `user` may read and write it (root may always).
    func accessible(by user: UserIdentity) -> Bool {
        guard exists else { return false }
        if user.uid == 0 { return true }
        if owner == user.uid { return mode & 0o600 == 0o600 }
        if user.groups.contains(group) { return mode & 0o060 == 0o060 }
        return mode & 0o006 == 0o006
    }
}

/// A USB device found under /sys/bus/usb/devices.
struct USBDeviceFacts: Sendable, Hashable {
    var vendor: String
    var product: String
    var bus: Int
    var address: Int
    /// The kernel drivers bound to its interfaces (e.g. pn533_usb, cdc_acm, ch341).
    var drivers: [String]
    /// /dev/bus/usb/BBB/DDD.
    var node: NodeFacts
    /// Serial ports it provides (ttyUSB0, ttyACM0), with their /dev nodes.
    var ttys: [NodeFacts]
}

/// Everything the doctor looks at, read from a root folder: `/` on a real machine, a faked tree
/// in tests (`/sys`, `/proc`, `/dev`, `/etc` below it).
struct SystemFacts: Sendable, Hashable {
    var root: String
    var user: UserIdentity
    var groupNames: [UInt32: String] = [:]
    var loadedModules: Set<String> = []
    var processes: Set<String> = []
    var usb: [USBDeviceFacts] = []
    var kernelCommandLine = ""
    var boardModel: String?
    var serial0: NodeFacts?
    var udevRulesInstalled = false
    var blacklistInstalled = false
    var libnfcConfig: String?
    /// The readers pcscd has (SCardListReaders); `nil` when pcscd was not asked or not reached.
    var pcscReaders: [String]?
    /// The kernel's word on the system clock (`ntp_adjtime`): synchronised, not, or unknown.
    var clockSynchronised: Bool?
    /// chrony is configured (/etc/chrony/chrony.conf), and takes gpsd's time (`refclock SHM`
    /// or `refclock SOCK` in it or in /etc/chrony/conf.d/*.conf).
    var chronyConfigured = false
    var chronyGPSRefclock = false

    func groupName(_ gid: UInt32) -> String { groupNames[gid] ?? String(gid) }
    func groupID(_ name: String) -> UInt32? { groupNames.first { $0.value == name }?.key }

    /// Reads the facts below `root`.
    static func read(root: String = "/", user: UserIdentity = .current) -> SystemFacts {
        let fm = FileManager.default
        func path(_ relative: String) -> String { (root as NSString).appendingPathComponent(relative) }
        func text(_ relative: String) -> String? {
            fm.contents(atPath: path(relative)).map { String(decoding: $0, as: UTF8.self) }
        }
        func node(_ relative: String) -> NodeFacts {
            guard let info = try? Stat(path(relative)) else { return NodeFacts(path: "/" + relative, exists: false) }
            return NodeFacts(path: "/" + relative, exists: true, mode: UInt16(info.mode & 0o7777), owner: info.userID, group: info.groupID)
        }
        var facts = SystemFacts(root: root, user: user)
        for line in (text("etc/group") ?? "").split(separator: "\n") {
            let fields = line.split(separator: ":", omittingEmptySubsequences: false)
            if fields.count >= 3, let gid = UInt32(fields[2]) { facts.groupNames[gid] = String(fields[0]) }
        }
        facts.loadedModules = Set(
            (text("proc/modules") ?? "").split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) })
        for entry in (try? fm.contentsOfDirectory(atPath: path("proc"))) ?? [] where entry.allSatisfy(\.isNumber) {
            if let comm = text("proc/\(entry)/comm") { facts.processes.insert(comm.trimmingCharacters(in: .whitespacesAndNewlines)) }
        }
        facts.kernelCommandLine = (text("proc/cmdline") ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        facts.boardModel = text("proc/device-tree/model").map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\u{0}\n ")) }
        if fm.fileExists(atPath: path("dev/serial0")) || facts.boardModel?.contains("Raspberry Pi") == true {
            facts.serial0 = node("dev/serial0")
        }
        facts.udevRulesInstalled = ["etc/udev/rules.d/60-tagfix.rules", "lib/udev/rules.d/60-tagfix.rules"].contains {
            fm.fileExists(atPath: path($0))
        }
        facts.blacklistInstalled = fm.fileExists(atPath: path("etc/modprobe.d/blacklist-libnfc.conf"))
        facts.libnfcConfig = fm.fileExists(atPath: path("etc/nfc/libnfc.conf")) ? "/etc/nfc/libnfc.conf" : nil
        let chronyFiles =
            ["etc/chrony/chrony.conf"]
            + ((try? fm.contentsOfDirectory(atPath: path("etc/chrony/conf.d"))) ?? []).filter { $0.hasSuffix(".conf") }.map {
                "etc/chrony/conf.d/\($0)"
            }
        let chrony = chronyFiles.compactMap(text)
        facts.chronyConfigured = !chrony.isEmpty
        facts.chronyGPSRefclock = chrony.contains { file in
            file.split(separator: "\n").contains { line in
                let words = line.split(whereSeparator: \.isWhitespace)
                return words.count >= 2 && words[0] == "refclock" && (words[1] == "SHM" || words[1] == "SOCK")
            }
        }

        let devices = "sys/bus/usb/devices"
        for name in ((try? fm.contentsOfDirectory(atPath: path(devices))) ?? []).sorted() where !name.contains(":") {
            let base = "\(devices)/\(name)"
            guard let vendor = text("\(base)/idVendor")?.trimmingCharacters(in: .whitespacesAndNewlines).lowercased(),
                let product = text("\(base)/idProduct")?.trimmingCharacters(in: .whitespacesAndNewlines).lowercased(),
                let bus = text("\(base)/busnum").flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }),
                let address = text("\(base)/devnum").flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
            else { continue }
            var drivers: [String] = []
            var ttys: [NodeFacts] = []
            for interface in ((try? fm.contentsOfDirectory(atPath: path(devices))) ?? []).sorted() where interface.hasPrefix(name + ":") {
                let interfacePath = "\(devices)/\(interface)"
                if let target = try? fm.destinationOfSymbolicLink(atPath: path("\(interfacePath)/driver")) {
                    drivers.append((target as NSString).lastPathComponent)
                }
                let entries = (try? fm.contentsOfDirectory(atPath: path(interfacePath))) ?? []
                var ttyNames = entries.filter { $0.hasPrefix("tty") && $0 != "tty" }
                if entries.contains("tty") { ttyNames += (try? fm.contentsOfDirectory(atPath: path("\(interfacePath)/tty"))) ?? [] }
                ttys += ttyNames.sorted().map { node("dev/\($0)") }
            }
            let busNode = String(format: "dev/bus/usb/%03d/%03d", bus, address)
            facts.usb.append(
                USBDeviceFacts(
                    vendor: vendor, product: product, bus: bus, address: address, drivers: drivers, node: node(busNode), ttys: ttys))
        }
        return facts
    }
}

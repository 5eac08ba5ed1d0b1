import TagFixCore
import TagFixDevices
import TagFixDoctor
import TagFixGPSD

/// `tagfix doctor`: checks the reader, the GPS and the system around them, and says how to fix
/// what is wrong.
struct DoctorCommand: Subcommand {
    static let spec = CommandSpec(
        name: "doctor",
        abstract: "Check readers, GPS and the system around them; explain each problem and its fix.",
        discussion: """
            Looks at the USB readers, USB-serial bridges and GPS receivers present; whether a \
            kernel NFC module (pn533_usb, pn533, nfc, port100) or pcscd holds a reader; whether \
            you may open each device (udev rules, the plugdev and dialout groups); the Raspberry \
            Pi's serial console; libnfc; and gpsd (running, reachable, a receiver, a fix). With \
            --reader it also opens that reader. Exits 69 when something blocks, 0 otherwise \
            (warnings included).
            """,
        options: [
            .init(name: "reader", valueName: "CONNSTRING", help: "Also open this reader (libnfc connstring)."),
            .init(name: "gps", valueName: "SOURCE", help: "gpsd to ask, gpsd://HOST:PORT; default gpsd://localhost:2947; 'none' to skip."),
            .init(name: "gps-wait", valueName: "S", help: "How long to wait for gpsd's reports, seconds; default 3."),
            .init(name: "root", valueName: "DIR", help: "Read /sys, /proc, /dev and /etc below DIR (for tests and support bundles)."),
            .init(name: "json", valueName: nil, help: "One JSON object per finding."),
        ],
        examples: [
            "tagfix doctor",
            "tagfix doctor --reader pn532_uart:/dev/ttyUSB0 --gps gpsd://localhost:2947",
            "tagfix doctor --gps none --json",
        ])

    var reader: String?
    var gps: GPSDEndpoint?
    var gpsWait: Duration
    var root: String
    var json: Bool

    init(_ arguments: ParsedArguments) throws(CLIError) {
        reader = try arguments.value("reader").map { text throws(CLIError) in
            // Checked as every command checks --reader; doctor probes libnfc readers only.
            guard let connstring = try ReaderOption.address(text, command: Self.spec.name).connstring else {
                throw .usage("doctor opens libnfc readers only: \"\(text)\" is not a libnfc connstring", command: Self.spec.name)
            }
            return connstring
        }
        gps = try GPSOption.endpoint(arguments, command: Self.spec.name)
        gpsWait = try arguments.seconds("gps-wait", in: 0.1...120, command: Self.spec.name) ?? .seconds(3)
        root = arguments.value("root") ?? "/"
        json = arguments.flag("json")
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let findings = await Doctor.examine(root: root, reader: reader, gps: gps, gpsWait: gpsWait)
        for finding in findings {
            if json {
                var object = JSONObjectWriter()
                object.add("severity", "\(finding.severity)")
                object.add("code", finding.code)
                object.add("message", finding.message)
                object.add("fix", finding.fix)
                io.out(object.text)
            } else {
                io.out("\(finding.severity.symbol) \(finding.message)")
                if let fix = finding.fix { io.out("    fix: \(fix)") }
            }
        }
        let blocking = findings.filter { $0.severity == .blocking }.count
        if !json {
            let warnings = findings.filter { $0.severity == .warning }.count
            io.out(
                blocking == 0
                    ? "no blocking problems\(warnings > 0 ? " (\(warnings) warning\(warnings == 1 ? "" : "s"))" : "")"
                    : "\(blocking) blocking problem\(blocking == 1 ? "" : "s")")
        }
        if blocking > 0 { throw .unavailable("\(blocking) blocking problem\(blocking == 1 ? "" : "s") found (see above)") }
    }
}

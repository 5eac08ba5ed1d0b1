import Foundation
import Synchronization
import TagFixCore
import TagFixDevices
import TagFixGPSD
import TagFixNDEF
import TagFixNFC
import TagFixPCSC
import TagFixReport

/// `tagfix scan`: read tags with a real reader (or the PN532 emulator) and print what they hold.
struct ScanCommand: Subcommand {
    static let spec = CommandSpec(
        name: "scan",
        abstract: "Read NFC tags with a reader (libnfc) and print each one's UID, type, NDEF records and URL.",
        discussion: """
            The reader is a libnfc connstring (pn532_uart:/dev/ttyUSB0, pn532_i2c:/dev/i2c-1, \
            pn532_spi:/dev/spidev0.0:500000, pn53x_usb, acr122_usb, acr122s:/dev/ttyUSB0, \
            arygon:/dev/ttyUSB0: the drivers Debian's libnfc has; hardware.md#readers), or \
            mock:SCENARIO (a scenario file's tags); without --reader, libnfc's default \
            (LIBNFC_DEVICE, /etc/nfc/libnfc.conf, or the first reader found). Reads Type 2 tags (NTAG21x, \
            Ultralight) with the fewest bytes the tag allows, and Type 4 tags. If the reader goes \
            away after it was working, scan reconnects by itself. SIGINT (Ctrl-C) or SIGTERM ends \
            it normally: the reader is closed and the exit code is 0.
            A reader whose device file is there but that does not answer (still waking, or busy) \
            is said once and tried again until --timeout. \
            Exit codes: 0 the tags were read (or SIGINT / SIGTERM), 69 the reader cannot be opened (nothing at \
            its path, no such USB reader), 75 --timeout passed before --count tags.
            """,
        options: [
            .init(name: "reader", valueName: "ADDRESS", help: ReaderOption.help),
            .init(name: "json", valueName: nil, help: "One JSON object per tag (JSON Lines)."),
            .init(name: "count", valueName: "N", help: "Stop after N tags; default: run until interrupted."),
            .init(name: "timeout", valueName: "S", help: "Give up after S seconds (exit 75)."),
        ],
        examples: [
            "tagfix scan --reader pn532_uart:/dev/ttyUSB0",
            "tagfix scan --json --count 1 | jq -r .url",
            "LIBNFC_DEVICE=pn532_uart:/tmp/pn532 tagfix scan --count 3",
        ])

    var reader: ReaderAddress
    var json: Bool
    var count: Int?
    var timeout: Duration?

    init(_ arguments: ParsedArguments) throws(CLIError) {
        reader = try ReaderOption.address(arguments.value("reader"), command: "scan")
        json = arguments.flag("json")
        count = try arguments.number("count", in: 1...1_000_000, command: "scan").map { Int($0) }
        timeout = try arguments.seconds("timeout", in: 0.1...86_400, command: "scan")
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        let device = try ReaderOption.reader(reader, clock: MonotonicClock(), command: "scan")
        // A reader whose device file is there but that does not answer yet (waking, or a loaded
        // machine's emulator) is waited for, until --timeout; a path with nothing behind it is not.
        let present = reader.deviceIsThere
        let outcome = await Self.scan(device, count: count, timeout: timeout, io: io, json: json, waitForReader: present)
        switch outcome {
        case .done: return
        case .unavailable(let message): throw .unavailable(message)
        case .timedOut(let read, let readerAnswered):
            var message = "no \(read == 0 ? "tag" : "more tags") within the timeout (\(read) read)"
            if !readerAnswered {
                message += ": the reader never answered (is it hung? unplug it and plug it in again, or run tagfix doctor)"
            }
            throw .timedOut(message)
        }
    }

    enum Outcome: Sendable {
        case done
        case unavailable(String)
        /// The tags read, and whether the reader ever answered.
        case timedOut(Int, readerAnswered: Bool)
    }

    static func scan(
        _ device: any TagReader, count: Int?, timeout: Duration?, io: any TerminalOutput, json: Bool, waitForReader: Bool = false
    ) async -> Outcome {
        let read = Counter()
        let answered = Mutex(false)
        let stop = StopSignals()
        defer { stop.cancel() }
        let clock = MonotonicClock()
        let outcome = await race(
            deadline: timeout.map { clock.now.advanced(by: $0) }, clock: clock,
            first: [
                { @Sendable () async -> Outcome in
                    var ready = false
                    for await event in device.events() {
                        switch event {
                        case .ready(let description):
                            ready = true
                            answered.withLock { $0 = true }
                            io.err("reader: \(description)")
                        case .tagPresent(let scan):
                            io.out(json ? scanJSON(scan) : scanText(scan))
                            let total = read.increment()
                            if let count, total >= count { return .done }
                        case .tagRemoved:
                            break
                        case .failed(let error):
                            io.err("! \(error)")
                        case .disconnected(let error):
                            if !ready, !waitForReader { return .unavailable("cannot open the reader: \(error)") }
                            if !ready {
                                // Said once: the reader tries again on its own, with backoff.
                                io.err(
                                    "! the reader does not answer yet: \(error); trying again\(timeout == nil ? "" : " until --timeout")…")
                                continue
                            }
                            io.err("! reader disconnected: \(error); reconnecting…")
                            ready = false
                        }
                    }
                    return .done
                },
                { @Sendable () async -> Outcome in
                    _ = await stop.wait()
                    return .done
                },
            ])
        switch outcome {
        case .value(let outcome): return outcome
        case .timedOut: return .timedOut(read.value, readerAnswered: answered.withLock { $0 })
        case .cancelled: return .done
        }
    }

    static func scanText(_ scan: TagScan) -> String { ScanReport.line(scan) }

    static func scanJSON(_ scan: TagScan) -> String { ScanReport.json(scan) }
}

final class Counter: Sendable {
    private let count = Mutex(0)
    var value: Int { count.withLock { $0 } }
    func increment() -> Int {
        count.withLock { value in
            value += 1
            return value
        }
    }
}

/// `tagfix devices`: the readers libnfc finds and those pcscd has.
struct DevicesCommand: Subcommand {
    static let spec = CommandSpec(
        name: "devices",
        abstract: "List the NFC readers libnfc finds and pcscd has, and the GPS receivers gpsd reads, with their --reader addresses.",
        discussion: """
            Readers come from libnfc (nfc_list_devices: USB readers, LIBNFC_DEVICE, libnfc.conf) \
            and from pcscd (SCardListReaders, each as pcsc:NAME); \
            receivers from gpsd's DEVICES list (--gps, default gpsd://localhost:2947; --gps none \
            skips it). Exit code 69 when no reader is found, with the usual reasons: not plugged \
            in, held by the kernel's pn533_usb / nfc modules (see hardware.md#kernel-modules), no \
            permission (udev rules, plugdev group), or a UART reader that libnfc does not scan for \
            (name it with LIBNFC_DEVICE=pn532_uart:/dev/ttyUSB0). tagfix doctor says which.
            """,
        options: [
            .init(name: "gps", valueName: "SOURCE", help: "gpsd to ask, gpsd://HOST:PORT; default gpsd://localhost:2947; 'none' to skip."),
            .init(name: "json", valueName: nil, help: "Print one JSON object: {\"readers\": [...], \"gps\": [...]}."),
        ],
        examples: ["tagfix devices", "LIBNFC_DEVICE=pn532_uart:/dev/ttyUSB0 tagfix devices --json"])

    var json: Bool
    var gps: GPSDEndpoint?

    init(_ arguments: ParsedArguments) throws(CLIError) {
        json = arguments.flag("json")
        gps = try GPSOption.endpoint(arguments, command: Self.spec.name)
    }

    func run(_ io: some TerminalOutput) async throws(CLIError) {
        var found: [String]
        do {
            found = try LibNFC.devices()
        } catch {
            throw .unavailable(error.description)
        }
        switch await PCSC.readers() {
        case .success(let names): found += names.map { "pcsc:\($0)" }
        case .failure(let error): if !error.serviceGone { io.err("note: PC/SC: \(error)") }
        }
        var receivers: [GPSDDevice] = []
        var gpsProblem: String?
        if let gps {
            switch await gps.devices() {
            case .success(let list): receivers = list
            case .failure(let error): gpsProblem = error.description
            }
        }
        if json {
            let gpsJSON = receivers.map { device -> String in
                var object = JSONObjectWriter()
                object.add("gps", "\(gps.map { "gpsd://\($0.host):\($0.port)" } ?? "")\(device.path)")
                object.add("path", device.path)
                object.add("driver", device.driver.isEmpty ? nil : device.driver)
                return object.text
            }
            io.out(#"{"readers":[\#(found.map(JSONValue.quoted).joined(separator: ","))],"gps":[\#(gpsJSON.joined(separator: ","))]}"#)
        } else {
            for connstring in found { io.out("reader  \(connstring)") }
            for device in receivers {
                io.out(
                    "gps     gpsd://\(gps?.host ?? "localhost"):\(gps?.port ?? 2947)\(device.path)\(device.driver.isEmpty ? "" : "  (\(device.driver))")"
                )
            }
        }
        if let gpsProblem { io.err("note: \(gpsProblem)") }
        guard !found.isEmpty else {
            throw .unavailable(
                "no NFC reader found. Is it plugged in? A USB reader may be held by the kernel's pn533_usb / nfc modules (see hardware.md#kernel-modules) or lack permissions (udev rules, plugdev group). A UART reader must be named: LIBNFC_DEVICE=pn532_uart:/dev/ttyUSB0 or --reader. Run tagfix doctor."
            )
        }
    }
}

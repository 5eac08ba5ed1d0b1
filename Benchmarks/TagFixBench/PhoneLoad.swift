// The benchmark's phones over HTTP on one event loop (`LoopPhones`): what a load generator such
// as wrk does, one thread and a kept connection a phone, so the phones take as little of the
// machine's two cores from the server under test as they can, for the loads that saturate it
// (back to back, bursts). Paced loads keep a thread a phone (`tapAtOnce`), each sleeping to its
// tap's due time: one loop thread sharing the cores with a busy server is scheduled late, and
// that lateness, charged to the server from the due time, was the loop's (the sweep's p99 went
// from 9 to 13 ms at 8,000 taps/s with the same server). `TAGFIX_BENCH_PHONE_THREADS=1` puts
// every load on threads, for a comparison.
import Foundation
import Glibc
import Synchronization
import TagFixServe
import TagFixSystem

/// `phones` phones, each its own kept HTTP/1.1 connection from a loopback address of its own
/// (127.0.x.y), on one `IOLoop`: a phone sends its next POST when its load says so and reads its
/// answer when the loop says it is there. A tap's time runs from its send to the answer read
/// whole. A connection the server closed (`Connection: close`, or found closed before an answer
/// began on a kept connection, once) is opened again, as `LoopbackHTTPClient` does.
final class LoopPhones: Sendable {
    enum Load: Sendable {
        case backToBack
        /// Every phone taps once; the next round when all have their answers.
        case bursts
    }

    private struct Phone {
        var descriptor: FileDescriptor?
        var registration: IORegistration?
        var buffer: [UInt8] = []
        /// The index of its tap in flight (or next), and when that tap's time began.
        var next = 0
        var began: ContinuousClock.Instant?
        /// Whether the connection carried an answer before (a close then is the server's idle
        /// timeout: the POST is sent again once).
        var reused = false
        var resent = false
    }

    private struct Run {
        var requests: [[[UInt8]]] = []
        var load = Load.backToBack
        var start: ContinuousClock.Instant
        var latencies: [Double] = []
        var answered = 0
        var confirmed = 0
        var left = 0
        var roundLeft = 0
        var refused: [Int: Int] = [:]
    }

    private struct State {
        var phones: [Phone]
        var run: Run
        var connections = 0
        var chunk = [UInt8](repeating: 0, count: 16_384)
    }

    private let port: UInt16
    private let count: Int
    private let loop: IOLoop<ContinuousClock>
    private let state: Mutex<State>
    private let done = DispatchSemaphore(value: 0)
    private let clock = ContinuousClock()

    init(phones: Int, port: UInt16) throws {
        self.port = port
        count = phones
        loop = try IOLoop(name: "bench-phones", clock: ContinuousClock())
        state = Mutex(State(phones: Array(repeating: Phone(), count: phones), run: Run(start: ContinuousClock().now)))
    }

    /// The connections the phones opened (one each when every connection was kept throughout).
    var connections: Int { state.withLock { $0.connections } }

    /// The phones tap `bodies` (bodies[phone] in order) under `load`; returns when every tap has
    /// its answer or its failure.
    func run(_ bodies: [[String]], load: Load) -> (times: TapTimes, refused: [Int: Int]) {
        let head = LoopbackHTTPClient.requestHead(
            path: PhoneTapRoute.postPath, port: port, cookie: "\(PhoneCookie.name)=\(PhoneTapSite.token)")
        let rounds = bodies.map(\.count).min() ?? 0
        var bursts = false
        if case .bursts = load { bursts = true }
        let requests = bodies.map { mine in
            (bursts ? Array(mine.prefix(rounds)) : mine).map { body in
                head.request(body: body)
            }
        }
        let total = requests.reduce(0) { $0 + $1.count }
        guard total > 0 else { return (TapTimes(latencies: [], elapsed: 0, answered: 0, confirmed: 0), [:]) }
        _ = loop.execute { [self] in
            state.withLock { state in
                for phone in state.phones.indices { state.phones[phone].next = 0 }
                state.run = Run(requests: requests, load: load, start: clock.now, left: total, roundLeft: count)
                for phone in 0..<count where !requests[phone].isEmpty { begin(phone, &state) }
            }
        }
        done.wait()
        return state.withLock { state in
            let took = state.run.start.duration(to: clock.now)
            let elapsed = Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18
            return (
                TapTimes(latencies: state.run.latencies, elapsed: elapsed, answered: state.run.answered, confirmed: state.run.confirmed),
                state.run.refused
            )
        }
    }

    /// Closes every connection and the loop; returns once the loop's thread has ended.
    func close() {
        let ended = DispatchSemaphore(value: 0)
        _ = loop.execute { [self] in
            state.withLock { state in
                for phone in state.phones.indices { disconnect(phone, &state) }
            }
        }
        loop.close { ended.signal() }
        ended.wait()
    }

    // MARK: - On the loop's thread

    /// Phone `phone`'s next tap, now.
    private func begin(_ phone: Int, _ state: inout State) {
        send(phone, began: clock.now, &state)
    }

    private func send(_ phone: Int, began: ContinuousClock.Instant, _ state: inout State) {
        state.phones[phone].began = began
        state.phones[phone].resent = false
        transmit(phone, &state)
    }

    /// Sends the phone's tap in flight, connecting first when it has no connection.
    private func transmit(_ phone: Int, _ state: inout State) {
        if state.phones[phone].descriptor == nil, !connect(phone, &state) {
            finish(phone, status: nil, confirmed: false, &state)
            return
        }
        let request = state.run.requests[phone][state.phones[phone].next]
        // A request is a few hundred bytes: a new or drained socket takes it whole.
        guard let descriptor = state.phones[phone].descriptor, (try? descriptor.send(request[...])) == request.count else {
            disconnect(phone, &state)
            finish(phone, status: nil, confirmed: false, &state)
            return
        }
    }

    private func connect(_ phone: Int, _ state: inout State) -> Bool {
        guard let descriptor = try? FileDescriptor.socket(domain: AF_INET, type: FileDescriptor.stream) else { return false }
        do {
            try descriptor.setOption(level: Int32(IPPROTO_TCP), name: TCP_NODELAY, to: 1)
            if let source = SocketAddress.ipv4(LoopbackHTTPClient.source(phone: phone), port: 0) { try descriptor.bind(to: source) }
            try descriptor.connect(to: .loopback(port: Int(port)))
            state.phones[phone].registration = try loop.register(descriptor, for: .readable) { [self] _ in
                self.state.withLock { readable(phone, &$0) }
            }
        } catch {
            _ = try? descriptor.close()
            return false
        }
        state.phones[phone].descriptor = descriptor
        state.phones[phone].buffer = []
        state.phones[phone].reused = false
        state.connections += 1
        return true
    }

    private func disconnect(_ phone: Int, _ state: inout State) {
        if let registration = state.phones[phone].registration { loop.deregister(registration) }
        if let descriptor = state.phones[phone].descriptor { _ = try? descriptor.close() }
        state.phones[phone].registration = nil
        state.phones[phone].descriptor = nil
        state.phones[phone].buffer = []
    }

    private func readable(_ phone: Int, _ state: inout State) {
        guard let descriptor = state.phones[phone].descriptor else { return }
        let got = (try? descriptor.receive(into: &state.chunk)) ?? -1
        guard got > 0 else {
            let inFlight = state.phones[phone].began != nil
            let before = state.phones[phone].buffer.isEmpty
            let retry = inFlight && before && state.phones[phone].reused && !state.phones[phone].resent
            disconnect(phone, &state)
            if retry {
                state.phones[phone].resent = true
                transmit(phone, &state)
            } else if inFlight {
                finish(phone, status: nil, confirmed: false, &state)
            }
            return
        }
        state.phones[phone].buffer += state.chunk[..<got]
        let buffer = state.phones[phone].buffer
        guard let end = LoopbackHTTPClient.headEnd(buffer, from: 0) else { return }
        let (status, length, keepAlive) = LoopbackHTTPClient.parseHead(buffer[..<end])
        guard buffer.count >= end + 4 + length else { return }
        let confirmed = status == 200 && answerConfirmed(buffer[(end + 4)..<(end + 4 + length)])
        state.phones[phone].buffer.removeFirst(end + 4 + length)
        state.phones[phone].reused = true
        if !keepAlive { disconnect(phone, &state) }
        finish(phone, status: status, confirmed: confirmed, &state)
    }

    /// The phone's tap in flight has its answer (`status`), or failed (`nil`): counted, and its
    /// next tap begun as the load says.
    private func finish(_ phone: Int, status: Int?, confirmed: Bool, _ state: inout State) {
        guard let began = state.phones[phone].began else { return }
        let took = began.duration(to: clock.now)
        state.run.latencies.append(Double(took.components.seconds) + Double(took.components.attoseconds) * 1e-18)
        if status == 200 {
            state.run.answered += 1
            if confirmed { state.run.confirmed += 1 }
        } else {
            state.run.refused[status ?? 0, default: 0] += 1
        }
        state.phones[phone].began = nil
        state.phones[phone].next += 1
        state.run.left -= 1
        if state.run.left == 0 {
            done.signal()
            return
        }
        switch state.run.load {
        case .backToBack:
            if state.phones[phone].next < state.run.requests[phone].count { begin(phone, &state) }
        case .bursts:
            state.run.roundLeft -= 1
            if state.run.roundLeft == 0 {
                state.run.roundLeft = count
                for other in 0..<count { begin(other, &state) }
            }
        }
    }
}

/// Whether an answer's body holds `"verdict":"confirmed"`.
func answerConfirmed(_ body: ArraySlice<UInt8>) -> Bool {
    let needle = Array(#""verdict":"confirmed""#.utf8)
    guard body.count >= needle.count else { return false }
    var start = body.startIndex
    while start + needle.count <= body.endIndex {
        if body[start] == needle[0], body[start..<(start + needle.count)].elementsEqual(needle) { return true }
        start += 1
    }
    return false
}

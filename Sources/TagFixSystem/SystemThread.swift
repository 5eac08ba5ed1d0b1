import CSystem
import Glibc

/// The one place a thread is made (`pthread_create(3)`, detached, named): the house's thread
/// types stand on it — `IOLoop`'s loop thread here, and `DeviceThread` (TagFixDevices) for a
/// device's blocking C calls, a blocking call taken off the cooperative pool (`offThePool`) and a
/// long-lived worker (`DeviceThread.detach`). Nothing joins a thread: whoever needs its end hears
/// of it from `body`.
public enum SystemThread {
    /// Starts `body` on a new, detached thread called `name` (its first 15 bytes: what the kernel
    /// keeps, and what `ps -L`, `top -H` and a debugger show). Fails only when the system has no
    /// thread to give (`EAGAIN`: the process's or the user's thread limit).
    public static func start(name: String, _ body: @escaping @Sendable () -> Void) throws(Errno) {
        let context = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { context in
                let start = Unmanaged<Start>.fromOpaque(context!).takeRetainedValue()
                csystem_name_thread(start.name)
                start.body()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<Start>.fromOpaque(context).release()
            throw Errno(rawValue: result)
        }
        pthread_detach(thread)
    }

    /// What a new thread runs: passed to it through `pthread_create`'s context pointer.
    private final class Start: Sendable {
        let name: String
        let body: @Sendable () -> Void
        init(name: String, body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
}

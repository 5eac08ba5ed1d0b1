import Foundation
import TagFixFuzzTargets

#if FUZZING
    // Built by Fuzz/run with -sanitize=fuzzer,address -DFUZZING. SwiftPM links an executable target's
    // entry point as `<module>_main` (here tagfix_fuzz_main) and makes it `main`, so libFuzzer's own
    // main is not used: this entry hands the command line to libFuzzer's driver (LLVMFuzzerRunDriver,
    // libFuzzer's documented API for programs with a main of their own). TAGFIX_FUZZ_TARGET names the
    // target (Fuzz/run sets it).
    nonisolated(unsafe) private var target: FuzzTarget?

    @_silgen_name("LLVMFuzzerRunDriver")
    private func runDriver(
        _ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    @_cdecl("tagfix_fuzz_main")
    public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        target = FuzzEnvironment.target()
        var count = argc
        var arguments = argv
        return runDriver(&count, &arguments, testOneInput)
    }

    private func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        guard let target else { return -1 }
        let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        do {
            try target.run(bytes)
        } catch {
            // An accepted input with a wrong answer is as bad as a crash: stop here, keep the input.
            fatalError("\(error)")
        }
        return 0
    }
#else
    /// Without libFuzzer: `tagfix-fuzz TARGET FILE…` runs a target over files (a corpus, a crash
    /// input) and says which break an invariant; `tagfix-fuzz --list` names the targets.
    @main
    struct Replay {
        static func main() {
            exit(FuzzEnvironment.replay(Array(CommandLine.arguments.dropFirst())))
        }
    }
#endif

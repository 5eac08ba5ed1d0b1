import CSSL
import Glibc
import TagFixSystem

// TLS for `serve --tls-cert FILE --tls-key FILE` (issue 34: browsers give positions only to
// secure pages), over OpenSSL's libssl with memory BIOs: the server's event loop moves bytes
// between its sockets and a `TLSSession`, which never touches a descriptor and never blocks.
// Every libssl call is in this file.

/// Why TLS could not be set up or went wrong on a connection: a kind, one line for a person,
/// and OpenSSL's own reason.
public struct TLSError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The certificate file is missing, unreadable or not PEM certificates.
        case certificateFile
        /// The key file is missing, unreadable or not a PEM private key.
        case keyFile
        /// The key is not the certificate's.
        case keyMismatch
        /// A trust store (a client's CA file) could not be read.
        case trustFile
        /// The peer broke the protocol, or its certificate did not verify.
        case handshake
        /// libssl could not make a context or a session (out of memory).
        case setup
    }

    public var kind: Kind
    /// The file at fault, for the file kinds.
    public var file: String?
    public var message: String
    /// OpenSSL's error queue, as text (`error:0480006C:PEM routines::no start line`).
    public var openSSL: String

    public var description: String {
        let cause = openSSL.isEmpty ? "" : " (\(openSSL))"
        return switch kind {
        case .certificateFile, .keyFile, .keyMismatch, .trustFile: "\(file ?? "?"): \(message)\(cause)"
        case .handshake, .setup: message + cause
        }
    }

    /// Whether the error is about a file a person gave.
    public var isFileError: Bool { file != nil }
    /// Whether that file is missing or cannot be read (the CLI's 66, as for any input file);
    /// otherwise it was read and is not what it should be (65).
    public var unreadable = false

    static func current(_ kind: Kind, file: String? = nil, _ message: String) -> TLSError {
        var error = TLSError(kind: kind, file: file, message: message, openSSL: OpenSSLErrors.drain())
        if let file, case .failure(let why) = Result(catching: { () throws(Errno) in try FileSystem.check(R_OK, of: file) }) {
            error.unreadable = true
            error.message = "cannot read the file (\(why))"
        }
        return error
    }
}

/// OpenSSL's per-thread error queue.
enum OpenSSLErrors {
    /// The queue's errors as one line, emptied.
    static func drain() -> String {
        var lines: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            lines.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return lines.joined(separator: "; ")
    }
}

// MARK: - Contexts

/// A server's certificate and key, loaded once: every connection's session is made from it.
/// Reloading (SIGHUP) makes a new context; sessions made from the old one keep it alive (libssl
/// counts the references) until they end.
/// @unchecked Sendable: holds an SSL_CTX, which libssl lets many threads make sessions from at once; never changed once loaded.
public final class TLSServerContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Loads a PEM certificate chain (the server's certificate first) and its PEM private key.
    /// TLS 1.2 at least.
    /// - Throws: `TLSError` naming the file at fault (`SSL_CTX_use_certificate_chain_file`,
    ///   `SSL_CTX_use_PrivateKey_file`, `SSL_CTX_check_private_key`).
    public init(certificate: String, key: String) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw .current(.setup, "cannot make a TLS context") }
        self.context = context
        guard cssl_ctx_min_tls12(context) == 1 else { throw .current(.setup, "cannot require TLS 1.2") }
        cssl_ctx_nonblocking_modes(context)
        guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
            throw .current(
                .certificateFile, file: certificate, "not a readable PEM certificate (give the certificate chain, server first: --tls-cert)"
            )
        }
        guard SSL_CTX_use_PrivateKey_file(context, key, SSL_FILETYPE_PEM) == 1 else {
            let error = TLSError.current(.keyFile, file: key, "not a readable PEM private key (--tls-key)")
            // libssl checks the pair as it loads the key.
            guard error.openSSL.contains("key values mismatch") else { throw error }
            throw TLSError(
                kind: .keyMismatch, file: key, message: "this key is not the key of \(certificate): give the pair that belongs together",
                openSSL: error.openSSL)
        }
        guard SSL_CTX_check_private_key(context) == 1 else {
            throw .current(.keyMismatch, file: key, "this key is not the key of \(certificate): give the pair that belongs together")
        }
    }

    deinit { SSL_CTX_free(context) }

    /// A new connection's session, in the server's role.
    public func session() throws(TLSError) -> TLSSession {
        try TLSSession(context: context, server: true, hostName: nil)
    }
}

/// A client's trust (a CA file): for the tests, and for anything that talks to a TLS server.
/// @unchecked Sendable: holds an SSL_CTX, which libssl lets many threads make sessions from at once; never changed once made.
public final class TLSClientContext: @unchecked Sendable {
    let context: OpaquePointer

    /// Trusts the PEM certificates in `caFile`; the server's certificate must verify against them.
    public init(trusting caFile: String) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw .current(.setup, "cannot make a TLS context") }
        self.context = context
        guard cssl_ctx_min_tls12(context) == 1 else { throw .current(.setup, "cannot require TLS 1.2") }
        cssl_ctx_nonblocking_modes(context)
        guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
            throw .current(.trustFile, file: caFile, "not a readable PEM CA certificate")
        }
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)
    }

    deinit { SSL_CTX_free(context) }

    /// A session to `hostName` (sent as SNI; the certificate must name it).
    public func session(hostName: String) throws(TLSError) -> TLSSession {
        try TLSSession(context: context, server: false, hostName: hostName)
    }
}

// MARK: - A connection

/// One connection's TLS: ciphertext from the socket goes in (`receive`), plaintext comes out
/// (`read`); plaintext goes in (`write`), ciphertext for the socket comes out (`takeOutput`).
/// Non-blocking: a call that needs more bytes from the peer says so and returns. Used by one
/// thread at a time (the event loop's), so not `Sendable`.
public final class TLSSession {
    private let ssl: OpaquePointer
    /// Ciphertext from the peer, read by libssl.
    private let input: OpaquePointer
    /// Ciphertext for the peer, written by libssl.
    private let output: OpaquePointer

    /// What `read` gave.
    public enum ReadResult: Equatable {
        /// Plaintext.
        case data([UInt8])
        /// Nothing yet: give it more ciphertext (and send what `takeOutput` has).
        case wantMore
        /// The peer closed the TLS session cleanly (close_notify).
        case closed
    }

    init(context: OpaquePointer, server: Bool, hostName: String?) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context) else { throw .current(.setup, "cannot make a TLS session") }
        guard let input = BIO_new(BIO_s_mem()), let output = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            throw .current(.setup, "cannot make the session's buffers")
        }
        // A memory BIO that is empty says "retry", not end of file.
        BIO_ctrl(input, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        BIO_ctrl(output, BIO_C_SET_BUF_MEM_EOF_RETURN, -1, nil)
        SSL_set_bio(ssl, input, output)  // the session owns both now
        self.ssl = ssl
        self.input = input
        self.output = output
        if server {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
            if let hostName {
                guard cssl_set_host_name(ssl, hostName) == 1, SSL_set1_host(ssl, hostName) == 1 else {
                    throw .current(.setup, "cannot ask for the host name \(hostName)")
                }
            }
        }
    }

    deinit { SSL_free(ssl) }

    /// Whether the handshake is done.
    public var isHandshakeComplete: Bool { SSL_is_init_finished(ssl) == 1 }

    /// Ciphertext that arrived from the peer.
    public func receive(_ ciphertext: some Collection<UInt8>) {
        guard !ciphertext.isEmpty else { return }
        let bytes = Array(ciphertext)
        bytes.withUnsafeBytes { _ = BIO_write(input, $0.baseAddress, Int32($0.count)) }
    }

    /// Ciphertext to send to the peer (handshake messages, records, alerts); empty when none.
    public func takeOutput() -> [UInt8] {
        let pending = Int(BIO_ctrl_pending(output))
        guard pending > 0 else { return [] }
        var bytes = [UInt8](repeating: 0, count: pending)
        let count = bytes.withUnsafeMutableBytes { BIO_read(output, $0.baseAddress, Int32(pending)) }
        return Array(bytes.prefix(max(0, Int(count))))
    }

    /// Moves the handshake on with what has been received: `true` once it is done.
    /// - Throws: `TLSError.handshake` when the peer broke the protocol or its certificate failed.
    @discardableResult
    public func handshake() throws(TLSError) -> Bool {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        if result == 1 { return true }
        try check(result, "the TLS handshake failed")
        return false
    }

    /// Plaintext the peer sent, up to `maximum` bytes (the handshake is moved on first).
    public func read(maximum: Int = 16 * 1024) throws(TLSError) -> ReadResult {
        ERR_clear_error()
        var bytes = [UInt8](repeating: 0, count: maximum)
        var count = 0
        let result = bytes.withUnsafeMutableBytes { SSL_read_ex(ssl, $0.baseAddress, maximum, &count) }
        if result == 1 { return .data(Array(bytes.prefix(count))) }
        if SSL_get_error(ssl, result) == SSL_ERROR_ZERO_RETURN { return .closed }
        try check(result, "the TLS connection failed")
        return .wantMore
    }

    /// Encrypts `plaintext` into the output; returns how many bytes were taken (0 while the
    /// handshake still waits for the peer).
    public func write(_ plaintext: some Collection<UInt8>) throws(TLSError) -> Int {
        guard !plaintext.isEmpty else { return 0 }
        ERR_clear_error()
        let bytes = Array(plaintext)
        var written = 0
        let result = bytes.withUnsafeBytes { SSL_write_ex(ssl, $0.baseAddress, $0.count, &written) }
        if result == 1 { return written }
        try check(result, "the TLS connection failed")
        return 0
    }

    /// Sends close_notify (its bytes come out of `takeOutput`).
    public func close() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Throws unless `result` only means "give me more bytes".
    private func check(_ result: Int32, _ message: String) throws(TLSError) {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE: return
        default:
            var text = message
            let verify = SSL_get_verify_result(ssl)
            if verify != Int(X509_V_OK), let reason = X509_verify_cert_error_string(verify) {
                text += ": the certificate does not verify (\(String(cString: reason)))"
            }
            throw .current(.handshake, text)
        }
    }
}

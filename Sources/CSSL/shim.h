#ifndef CSSL_SHIM_H
#define CSSL_SHIM_H

// OpenSSL 3's libssl (Debian libssl-dev) for Swift: TLS over memory BIOs for `serve --tls-cert`.
// Only what Swift cannot import is wrapped (function-like macros over SSL_ctrl / SSL_CTX_ctrl);
// every helper says why it exists.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/bio.h>

// SSL_CTX_set_min_proto_version is a macro: TLS 1.2 at least.
static inline int cssl_ctx_min_tls12(SSL_CTX *_Nonnull ctx) { return (int)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION); }

// SSL_CTX_set_mode is a macro: partial writes and a moving write buffer, as a non-blocking
// writer needs.
static inline void cssl_ctx_nonblocking_modes(SSL_CTX *_Nonnull ctx) {
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
}

// SSL_set_tlsext_host_name is a macro: the name a client asks for (SNI).
static inline int cssl_set_host_name(SSL *_Nonnull ssl, const char *_Nonnull name) { return (int)SSL_set_tlsext_host_name(ssl, name); }

#endif

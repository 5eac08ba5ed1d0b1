#ifndef CCRYPTO_SHIM_H
#define CCRYPTO_SHIM_H

// OpenSSL 3's libcrypto (Debian libssl-dev) for Swift: the EVP interfaces for AES, CMAC, ECDSA
// and Ed25519. Only what Swift cannot use directly is wrapped; every helper says why it exists.
#include <openssl/evp.h>
#include <openssl/ec.h>
#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/err.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/bio.h>

#endif

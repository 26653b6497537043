// The two DOM types effect's own declarations name from `effect/Schema` on (its crypto modules):
// every effect user without the DOM lib declares them or skips lib checks. Nothing else of the
// DOM may be needed by the package's declarations.
interface CryptoKey {
  readonly type: string
}
interface JsonWebKey {
  kty?: string
}

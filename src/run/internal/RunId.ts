/**
 * Run ids: random (version 4) UUIDs, drawn from the system's CSPRNG in batches. Private
 * to the runtime.
 */
const hexDigits = "0123456789abcdef"
/** Random bytes for run ids, drawn from the system's CSPRNG in batches. */
let entropy = new Uint8Array(0)
let entropyUsed = 0
const idCodes: Array<number> = new Array(36).fill(0)

/**
 * A random (version 4) UUID, as `crypto.randomUUID()` makes, but built as one flat
 * string: `randomUUID` returns a chain of concatenations that costs a run ~400 bytes
 * for as long as it lives.
 */
export const randomRunId = (): string => {
  if (entropyUsed + 16 > entropy.length) {
    entropy = crypto.getRandomValues(new Uint8Array(4096))
    entropyUsed = 0
  }
  let at = 0
  for (let i = 0; i < 16; i++) {
    let byte = entropy[entropyUsed + i] ?? 0
    if (i === 6) byte = (byte & 0x0f) | 0x40
    else if (i === 8) byte = (byte & 0x3f) | 0x80
    if (i === 4 || i === 6 || i === 8 || i === 10) idCodes[at++] = 45 // "-"
    idCodes[at++] = hexDigits.charCodeAt(byte >> 4)
    idCodes[at++] = hexDigits.charCodeAt(byte & 0x0f)
  }
  entropyUsed += 16
  return String.fromCharCode.apply(null, idCodes)
}

/**
 * What names a `.env` file, which may hold secrets (R3.6): the permission policy judges
 * the path a model sent by it, and the file tools the path a link led to.
 */

/**
 * `.env`, `.env.<suffix>` (`.env.local`), and the copies editors and people make of them
 * (`.env~`, `#.env#`, `.env-old`, `.env_backup`, `.env copy`): `.env` followed by nothing,
 * or by a character that is no letter or digit (`.envrc` and `.environment` are other files).
 */
export const isEnvName = (name: string): boolean => /^#?\.env(?:[^a-z0-9].*)?$/is.test(name)

/** A path whose last name is a `.env` file, or that goes through a directory named `.env`; either separator. */
export const isEnvPath = (value: string): boolean => isEnvNames(value.split(/[\\/]/))

/** {@link isEnvPath}, of a path's names. */
export const isEnvNames = (names: ReadonlyArray<string>): boolean => {
  const segments = names.filter((segment) => segment.length > 0)
  const last = segments[segments.length - 1]
  return (last !== undefined && isEnvName(last)) || segments.some((segment) => segment.toLowerCase() === ".env")
}

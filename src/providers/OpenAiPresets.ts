/**
 * The known chat-completions endpoints (OpenAI, DeepSeek) and the helpers that fill
 * their defaults into {@link OpenAiCompatible.Options}. Re-exported from
 * `OpenAiCompatible`, whose `layerConfig` reads them from the environment.
 *
 * @since 0.1.0
 */
import type { Dialect, Options } from "./OpenAiOptions.ts"

/**
 * Options for a preset: everything but the base URL and model is as in
 * {@link Options}, and those two have defaults.
 *
 * @category models
 * @since 0.1.0
 */
export type PresetOptions = Omit<Options, "baseUrl" | "model"> & {
  readonly baseUrl?: string | undefined
  readonly model?: string | undefined
}

/**
 * A known endpoint: its defaults and the environment variables it reads.
 *
 * @category models
 * @since 0.1.0
 */
export interface Preset {
  readonly name: string
  readonly baseUrl: string
  readonly model: string
  /** Where its API differs from OpenAI's (the output cap's name, reasoning options, `reasoning_content`). */
  readonly dialect: Dialect
  readonly env: { readonly apiKey: string; readonly baseUrl: string; readonly model: string }
}

/**
 * @category presets
 * @since 0.1.0
 */
export const OpenAi: Preset = Object.freeze({
  name: "openai",
  baseUrl: "https://api.openai.com/v1",
  model: "gpt-4o-mini",
  dialect: "openai",
  env: Object.freeze({ apiKey: "OPENAI_API_KEY", baseUrl: "OPENAI_BASE_URL", model: "OPENAI_MODEL" })
})

/**
 * @category presets
 * @since 0.1.0
 */
export const DeepSeek: Preset = Object.freeze({
  name: "deepseek",
  baseUrl: "https://api.deepseek.com",
  model: "deepseek-v4-flash",
  dialect: "deepseek",
  env: Object.freeze({ apiKey: "DEEPSEEK_API_KEY", baseUrl: "DEEPSEEK_BASE_URL", model: "DEEPSEEK_MODEL" })
})

const fromPreset =
  (preset: Preset) =>
  (options: PresetOptions): Options => ({
    ...options,
    baseUrl: options.baseUrl ?? preset.baseUrl,
    model: options.model ?? preset.model,
    dialect: options.dialect ?? preset.dialect
  })

/**
 * Options for OpenAI (`https://api.openai.com/v1`, default model `gpt-4o-mini`).
 *
 * @category presets
 * @since 0.1.0
 */
export const openai: (options: PresetOptions) => Options = fromPreset(OpenAi)

/**
 * Options for DeepSeek (`https://api.deepseek.com`, default model `deepseek-v4-flash`, in
 * thinking mode by default at DeepSeek), in DeepSeek's dialect: the output cap as
 * `max_tokens`, `thinking` and `reasoning_effort`, and each assistant turn with tool
 * calls carrying its `reasoning_content` back, as thinking mode requires.
 *
 * @category presets
 * @since 0.1.0
 */
export const deepseek: (options: PresetOptions) => Options = fromPreset(DeepSeek)

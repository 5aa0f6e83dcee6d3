//! Shared by the integration tests: where the demo model is and what its reference.json says.
#![allow(dead_code)]
use std::path::PathBuf;

/// models/glm5-demo of this repository, or $GLM5RT_DEMO_MODEL.
pub fn demo_dir() -> PathBuf {
    std::env::var_os("GLM5RT_DEMO_MODEL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../models/glm5-demo"))
}

/// The string value of `"key": "..."` in a JSON text (the reference file is flat; no JSON crate is
/// available offline), with the JSON escapes decoded.
pub fn json_string(json: &str, key: &str) -> String {
    let pat = format!("\"{key}\"");
    let at = json.find(&pat).unwrap_or_else(|| panic!("{key} not in reference.json"));
    let rest = &json[at + pat.len()..];
    let rest = &rest[rest.find('"').expect("string value") + 1..];
    let mut out = String::new();
    let mut chars = rest.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => return out,
            '\\' => match chars.next().expect("escape") {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'u' => {
                    let hex: String = chars.by_ref().take(4).collect();
                    let mut code = u32::from_str_radix(&hex, 16).expect("\\u escape");
                    if (0xD800..0xDC00).contains(&code) {
                        // a surrogate pair: \uD83D\uDE00
                        let low: String = chars.by_ref().skip(2).take(4).collect();
                        let low = u32::from_str_radix(&low, 16).expect("low surrogate");
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    }
                    out.push(char::from_u32(code).expect("valid code point"));
                }
                other => out.push(other),
            },
            c => out.push(c),
        }
    }
    panic!("unterminated string for {key}");
}

/// (prompt, greedy text up to the first end-of-turn tag) of the demo model's reference.json.
pub fn reference() -> (String, String) {
    let json = std::fs::read_to_string(demo_dir().join("reference.json")).expect("reading reference.json");
    let prompt = json_string(&json, "prompt");
    let greedy = json_string(&json, "greedy_text");
    // reference.json was made with eos disabled: the answer ends at the first eos, "<|user|>".
    let answer = greedy.split("<|user|>").next().unwrap().to_string();
    (prompt, answer)
}

//! Generates a reply with the safe API and streams it to stdout.
//!
//!   cargo run --offline --example generate -- [--temp T] [--seed N] [--max-new N] [MODEL_DIR] [PROMPT]
//!
//! MODEL_DIR defaults to the repository's demo model (models/glm5-demo); PROMPT to the question of
//! its reference.json. Statistics go to stderr.
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use glm5rt::{ChatMessage, ChatOptions, Model, ModelParams, Sampler, Session, SessionParams, Stop, Tokenizer};

fn run() -> Result<(), Box<dyn std::error::Error>> {
    let mut temp = 0.0f32;
    let mut seed = 0x5eedu64;
    let mut max_new = 128usize;
    let mut positional = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--temp" => temp = args.next().ok_or("--temp needs a value")?.parse()?,
            "--seed" => seed = args.next().ok_or("--seed needs a value")?.parse()?,
            "--max-new" => max_new = args.next().ok_or("--max-new needs a value")?.parse()?,
            "-h" | "--help" => {
                println!("usage: generate [--temp T] [--seed N] [--max-new N] [MODEL_DIR] [PROMPT]");
                return Ok(());
            }
            _ => positional.push(a),
        }
    }
    let dir = positional
        .first()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../models/glm5-demo"));
    let question = positional
        .get(1)
        .cloned()
        .unwrap_or_else(|| "What does `from_pretrained` do?".to_string());

    let t0 = Instant::now();
    let model = Model::load_with_progress(&dir, &ModelParams::new(), |_| true)
        .map_err(|e| format!("cannot load {}: {e}", dir.display()))?;
    let info = model.info()?;
    eprintln!(
        "glm5rt {} | {}: {} layers, vocab {}, {:?} | loaded in {:.2} s",
        glm5rt::version(),
        dir.display(),
        info.n_layers,
        info.n_vocab,
        info.backend,
        t0.elapsed().as_secs_f64()
    );
    let tok = Tokenizer::from_model(&model)?;
    let mut session = Session::with_params(&model, &SessionParams::new().seed(seed))?;

    let prompt = tok.chat_format(&[ChatMessage::user(question)], ChatOptions::default())?;
    let ids = tok.encode(&prompt, true)?;
    let t1 = Instant::now();
    session.append(&ids)?;
    let prefill = t1.elapsed().as_secs_f64();

    let sampler = if temp > 0.0 {
        Sampler::new().temperature(temp).top_p(0.95)
    } else {
        Sampler::greedy()
    };
    let t2 = Instant::now();
    let mut generated = 0usize;
    let mut out = std::io::stdout().lock();
    let mut pieces = session.generate(&tok, sampler, max_new)?;
    for piece in pieces.by_ref() {
        let piece = piece?;
        generated += piece.token.is_some() as usize;
        out.write_all(piece.text.as_bytes())?;
        out.flush()?;
    }
    let stop = pieces.stop_reason();
    drop(pieces);
    writeln!(out)?;
    let secs = t2.elapsed().as_secs_f64();
    eprintln!(
        "[prompt {} tokens in {:.2} s | {} tokens in {:.2} s, {:.1} tok/s | stop: {} | session {} tokens]",
        ids.len(),
        prefill,
        generated,
        secs,
        generated as f64 / secs.max(1e-9),
        match stop {
            Some(Stop::Eos(_)) => "eos",
            Some(Stop::Length) => "max-new",
            _ => "error",
        },
        session.n_tokens()
    );
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("generate: {e}");
            ExitCode::FAILURE
        }
    }
}

//! Real generation on the bundled demo model (models/glm5-demo) through the safe API.
mod common;

use std::sync::Arc;

use glm5rt::{ChatMessage, ChatOptions, Model, Sampler, Session, SessionParams, Status, Stop, Tokenizer};

fn load() -> (Arc<Model>, Tokenizer) {
    let model = Model::load(common::demo_dir()).expect("loading the demo model");
    let tok = Tokenizer::from_model(&model).expect("the demo model's tokenizer");
    (Arc::new(model), tok)
}

#[test]
fn chat_format_renders_the_reference_prompt() {
    // the tokenizer alone, from the model directory's tokenizer.json
    let tok = Tokenizer::load(common::demo_dir()).unwrap();
    let (prompt, _) = common::reference();
    let (question, _) = prompt_question(&prompt);
    let rendered = tok
        .chat_format(&[ChatMessage::user(question)], ChatOptions::default())
        .unwrap();
    assert_eq!(rendered, prompt);
}

/// The user text inside "[gMASK]<sop><|user|>...<|assistant|></think>".
fn prompt_question(prompt: &str) -> (String, ()) {
    let start = prompt.find("<|user|>").unwrap() + "<|user|>".len();
    let end = prompt.find("<|assistant|>").unwrap();
    (prompt[start..end].to_string(), ())
}

#[test]
fn greedy_generation_streams_the_reference_answer() {
    let (model, tok) = load();
    let (prompt, answer) = common::reference();
    let ids = tok.encode(&prompt, true).unwrap();
    assert!(!ids.is_empty());
    let mut session = Session::new(&model).unwrap();
    session.append(&ids).unwrap();
    assert_eq!(session.n_tokens(), ids.len());

    let mut text = String::new();
    let mut tokens = Vec::new();
    let mut pieces = session.generate(&tok, Sampler::greedy(), 200).unwrap();
    for piece in pieces.by_ref() {
        let piece = piece.unwrap();
        text.push_str(&piece.text);
        tokens.extend(piece.token);
    }
    let stop = pieces.stop_reason();
    drop(pieces);
    assert!(matches!(stop, Some(Stop::Eos(_))), "stopped by {stop:?} after {text:?}");
    assert!(tokens.len() > 5, "only {} tokens", tokens.len());
    // streaming pieces concatenate to the one-shot decode of the same ids
    assert_eq!(text, tok.decode(&tokens, false).unwrap());
    assert_eq!(text, answer);
    // the session holds prompt + reply + the eos token
    assert_eq!(session.n_tokens(), ids.len() + tokens.len() + 1);
    assert_eq!(&session.tokens().unwrap()[..ids.len()], &ids[..]);
}

#[test]
fn a_second_turn_sees_the_first() {
    let (model, tok) = load();
    let mut session = Session::new(&model).unwrap();
    let mut conversation = vec![ChatMessage::user("What does `from_pretrained` do?")];
    let first = tok.chat_format(&conversation, ChatOptions::default()).unwrap();
    session.append(&tok.encode(&first, true).unwrap()).unwrap();
    let reply: String = session
        .generate(&tok, Sampler::greedy(), 100)
        .unwrap()
        .map(|p| p.unwrap().text)
        .collect();
    assert!(!reply.is_empty());
    let after_first = session.n_tokens();

    conversation.push(ChatMessage::assistant(reply.clone()));
    conversation.push(ChatMessage::user("What is `forward` for?"));
    let second = tok.chat_format(&conversation, ChatOptions::default()).unwrap();
    assert!(
        second.contains(&reply),
        "the second prompt must contain the first reply"
    );
    let ids = tok.encode(&second, true).unwrap();
    // the first turn's tokens are a prefix of the second prompt: append only the rest
    let held = session.tokens().unwrap();
    let common = held.iter().zip(&ids).take_while(|(a, b)| a == b).count();
    assert!(common > after_first / 2, "only {common} of {after_first} tokens shared");
    session.truncate(common).unwrap();
    session.append(&ids[common..]).unwrap();
    assert_eq!(session.tokens().unwrap(), ids);
    let reply2: String = session
        .generate(&tok, Sampler::greedy(), 100)
        .unwrap()
        .map(|p| p.unwrap().text)
        .collect();
    assert!(!reply2.is_empty());
    assert!(session.n_tokens() > ids.len());
}

#[test]
fn seeded_sampling_repeats_and_snapshots_round_trip() {
    let (model, tok) = load();
    let (prompt, _) = common::reference();
    let ids = tok.encode(&prompt, true).unwrap();
    let sampler = Sampler::new().temperature(1.0).top_k(40).top_p(0.95);
    let run = |seed: u64| -> Vec<i32> {
        let mut s = Session::with_params(&model, &SessionParams::new().seed(seed)).unwrap();
        s.append(&ids).unwrap();
        (0..24).map(|_| s.step(&sampler).unwrap()).collect()
    };
    assert_eq!(run(7), run(7));

    let mut a = Session::new(&model).unwrap();
    a.append(&ids).unwrap();
    let path = std::env::temp_dir().join(format!("glm5rt-rust-test-{}.snap", std::process::id()));
    a.save(&path).unwrap();
    let next_a = a.step(&Sampler::greedy()).unwrap();
    let mut b = Session::new(&model).unwrap();
    b.load(&path).unwrap();
    std::fs::remove_file(&path).ok();
    assert_eq!(b.tokens().unwrap(), ids);
    assert_eq!(b.step(&Sampler::greedy()).unwrap(), next_a);
}

#[test]
fn logits_have_the_vocabulary_size() {
    let (model, tok) = load();
    let mut s = Session::new(&model).unwrap();
    assert!(s.logits().is_err(), "an empty session has no logits");
    let ids = tok.encode("[gMASK]<sop><|user|>hi<|assistant|>", true).unwrap();
    let all = s.append_with_logits(&ids).unwrap();
    let n_vocab = model.info().unwrap().n_vocab as usize;
    assert_eq!(all.len(), ids.len() * n_vocab);
    let last = s.logits().unwrap().to_vec();
    assert_eq!(last.len(), n_vocab);
    assert_eq!(&all[(ids.len() - 1) * n_vocab..], &last[..]);
    assert!(last.iter().all(|x| x.is_finite()));
}

#[test]
fn a_cancel_from_another_thread_stops_the_call_and_keeps_the_session() {
    let (model, tok) = load();
    let mut s = Session::new(&model).unwrap();
    let ids = tok.encode("[gMASK]<sop><|user|>hi<|assistant|></think>", true).unwrap();
    s.append(&ids).unwrap();
    let cancel = s.cancel_handle();
    // a pending cancel request stops the next compute call
    std::thread::spawn(move || cancel.cancel()).join().unwrap();
    let err = s.step(&Sampler::greedy()).unwrap_err();
    assert_eq!(err.status(), Status::Cancelled);
    assert_eq!(s.n_tokens(), ids.len(), "a cancelled call leaves the session unchanged");
    // the flag is cleared: the next call works
    s.step(&Sampler::greedy()).unwrap();
    assert_eq!(s.n_tokens(), ids.len() + 1);
}

#[test]
fn the_model_is_shared_by_threads() {
    let (model, tok) = load();
    let tok = Arc::new(tok);
    let (prompt, answer) = common::reference();
    let handles: Vec<_> = (0..2)
        .map(|_| {
            let (model, tok, prompt) = (Arc::clone(&model), Arc::clone(&tok), prompt.clone());
            std::thread::spawn(move || {
                let mut s = Session::new(&model).unwrap();
                s.append(&tok.encode(&prompt, true).unwrap()).unwrap();
                s.generate(&tok, Sampler::greedy(), 200)
                    .unwrap()
                    .map(|p| p.unwrap().text)
                    .collect::<String>()
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap(), answer);
    }
}

#[test]
fn progress_reports_cancels_and_carries_panics() {
    use glm5rt::ModelParams;
    let mut fractions = Vec::new();
    let model = Model::load_with_progress(common::demo_dir(), &ModelParams::new(), |f| {
        fractions.push(f);
        true
    })
    .unwrap();
    drop(model);
    assert!(!fractions.is_empty(), "the progress callback was never called");
    assert!(fractions.windows(2).all(|w| w[0] <= w[1]) && fractions.iter().all(|f| (0.0..=1.0).contains(f)));
    let err = Model::load_with_progress(common::demo_dir(), &ModelParams::new(), |_| false)
        .err()
        .unwrap();
    assert_eq!(err.status(), Status::Cancelled);
    // a panic in the callback cancels the load and resumes on the Rust side, not through C++ frames
    let caught = std::panic::catch_unwind(|| {
        let _ = Model::load_with_progress(common::demo_dir(), &ModelParams::new(), |_| panic!("boom"));
    });
    assert_eq!(*caught.unwrap_err().downcast::<&str>().unwrap(), "boom");
}

#[test]
fn log_lines_reach_the_callback_whole() {
    use glm5rt::{set_log_callback, set_log_level, LogLevel};
    use std::sync::Mutex;
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = Arc::clone(&lines);
    set_log_level(LogLevel::Debug);
    set_log_callback(Some(Box::new(move |_level, line: &str| {
        sink.lock().unwrap().push(line.to_string())
    })));
    let loaded = Model::load(common::demo_dir());
    set_log_callback(None);
    set_log_level(LogLevel::Warn);
    loaded.unwrap();
    let lines = lines.lock().unwrap();
    assert!(
        !lines.is_empty(),
        "no log line reached the callback while loading at DEBUG"
    );
    assert!(lines.iter().all(|l| !l.contains('\n')));
}

#[test]
fn batch_step_equals_stepping_alone() {
    let (model, tok) = load();
    let prompts = [
        "[gMASK]<sop><|user|>What does `from_pretrained` do?<|assistant|></think>",
        "[gMASK]<sop><|user|>What is `forward` for?<|assistant|></think>",
    ];
    let fresh = |p: &str| {
        let mut s = Session::new(&model).unwrap();
        s.append(&tok.encode(p, true).unwrap()).unwrap();
        s
    };
    let (mut a, mut b) = (fresh(prompts[0]), fresh(prompts[1]));
    let mut batched = Vec::new();
    for _ in 0..6 {
        batched.push(glm5rt::batch_step(&mut [&mut a, &mut b], &Sampler::greedy()).unwrap());
    }
    let (mut a1, mut b1) = (fresh(prompts[0]), fresh(prompts[1]));
    for row in &batched {
        assert_eq!(row.len(), 2);
        assert_eq!(row[0], a1.step(&Sampler::greedy()).unwrap());
        assert_eq!(row[1], b1.step(&Sampler::greedy()).unwrap());
    }
    assert_eq!(a.tokens().unwrap(), a1.tokens().unwrap());
}

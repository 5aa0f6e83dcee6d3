//! The safe API's contract where no model is needed: versions, errors with messages, type guarantees.
use glm5rt::{Error, Model, Session, Status, Tokenizer};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}

#[test]
fn thread_guarantees() {
    assert_send_sync::<Model>();
    assert_send_sync::<Tokenizer>();
    assert_send_sync::<glm5rt::CancelHandle>();
    assert_send::<Session>();
    assert_send::<glm5rt::DetokStream<'static>>();
}

#[test]
fn version_matches_the_bindings() {
    assert_eq!(glm5rt::version(), glm5rt::sys::GLM5RT_VERSION_STRING);
    assert_eq!(glm5rt::abi_version(), glm5rt::sys::GLM5RT_ABI_VERSION);
}

#[test]
fn status_codes_are_the_pinned_numbers() {
    assert_eq!(Status::Cancelled.code(), 7);
    assert_eq!(Status::from_code(6), Status::CacheFull);
    assert_eq!(Status::from_code(999), Status::Other(999));
    assert_eq!(Status::CacheFull.description(), "cache full");
}

#[test]
fn a_missing_directory_is_an_error_with_a_message() {
    let err = Model::load("/nonexistent/glm5rt/model")
        .err()
        .expect("loading a missing directory must fail");
    assert!(!err.message().is_empty(), "no message: {err:?}");
    assert!(err.to_string().contains(err.message()));
    let err = Tokenizer::load("/nonexistent/glm5rt/model").err().expect("must fail");
    assert!(!err.message().is_empty());
}

#[test]
fn a_nul_in_a_path_is_rejected_before_the_call() {
    let err = Model::load("models/\0demo").err().unwrap();
    assert_eq!(err.status(), Status::InvalidArgument);
    let _: &dyn std::error::Error = &err;
    let e2 = Error::new(Status::Io, "x");
    assert_eq!(e2.to_string(), "x (input/output error)");
}

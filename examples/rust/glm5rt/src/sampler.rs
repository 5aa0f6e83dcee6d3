//! Sampling parameters: `Sampler::greedy()` or `Sampler::new().temperature(0.8).top_p(0.95)`.
use glm5rt_sys as sys;

/// Sampling order in the library: repetition penalty, temperature, top-k, top-p, min-p, then a draw
/// with the session's seeded RNG. A temperature of 0 is greedy (argmax, lowest id wins ties).
#[derive(Debug, Clone, Copy)]
pub struct Sampler {
    raw: sys::glm5rt_sampler_params,
}

impl Default for Sampler {
    fn default() -> Self {
        let mut raw = sys::glm5rt_sampler_params::default();
        // SAFETY: fills a plain struct.
        unsafe { sys::glm5rt_sampler_default_params(&mut raw) };
        Sampler { raw }
    }
}

impl Sampler {
    /// The library's defaults: greedy.
    pub fn new() -> Self {
        Self::default()
    }
    pub fn greedy() -> Self {
        Self::default().temperature(0.0)
    }
    /// <= 0: greedy.
    pub fn temperature(mut self, t: f32) -> Self {
        self.raw.temperature = t;
        self
    }
    /// Keep the k most likely tokens; 0 = off.
    pub fn top_k(mut self, k: i32) -> Self {
        self.raw.top_k = k;
        self
    }
    /// Nucleus sampling; 1 = off.
    pub fn top_p(mut self, p: f32) -> Self {
        self.raw.top_p = p;
        self
    }
    /// Drop tokens below min_p * p_max; 0 = off.
    pub fn min_p(mut self, p: f32) -> Self {
        self.raw.min_p = p;
        self
    }
    /// CTRL-style penalty on the tokens of the last `last_n` positions (-1 = the whole session).
    pub fn repetition_penalty(mut self, penalty: f32, last_n: i32) -> Self {
        self.raw.repetition_penalty = penalty;
        self.raw.penalty_last_n = last_n;
        self
    }
    pub(crate) fn raw(&self) -> &sys::glm5rt_sampler_params {
        &self.raw
    }
}

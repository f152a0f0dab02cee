//! Bindings looked up once per `Env` object. workers-rs reads a binding's class name (D1) or
//! five of its methods (KV) on every lookup, each a call into JavaScript, while the Worker's
//! requests share one `Env`. A Durable Object in the same isolate has an `Env` of its own, and a
//! binding taken from one may not serve the other (D1 answers an internal error), so each cache
//! holds the `Env` its value came from and looks up again for another.

use std::cell::RefCell;

use wasm_bindgen::JsValue;
use worker::Env;

pub(crate) struct PerEnv<T>(RefCell<Option<(JsValue, T)>>);

impl<T: Clone> PerEnv<T> {
    pub(crate) const fn new() -> Self {
        Self(RefCell::new(None))
    }

    /// The value for `env`: the one kept if it came from `env`, else `look_up`'s, kept.
    pub(crate) fn get(&self, env: &Env, look_up: impl FnOnce() -> T) -> T {
        let env: &JsValue = env.as_ref();
        if let Some((kept_for, value)) = &*self.0.borrow()
            && kept_for == env
        {
            return value.clone();
        }
        let value = look_up();
        *self.0.borrow_mut() = Some((env.clone(), value.clone()));
        value
    }
}

//! Boxing a large future without building it on the stack first.

use std::pin::Pin;

/// `Box::pin(make())`, with the box allocated before `make` runs, so the compiler can build the
/// value straight into it. `Box::pin(future)` builds the future on the stack and then copies
/// all of it into the box: for a future of a whole call pipeline that is kilobytes on every
/// call, nearly all of them not yet written (issue 24).
pub fn box_in_place<F>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    Box::into_pin(Box::write(Box::new_uninit(), make()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_boxed_future_runs_as_the_unboxed_one() {
        let boxed = box_in_place(|| async { 40 + 2 });
        assert_eq!(boxed.await, 42);
    }
}

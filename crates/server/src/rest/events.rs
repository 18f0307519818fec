//! `/v1/events`: the live event stream (server-sent events), filtered to the tools the caller sees.

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::routing::get;
use axum::{Extension, Router};
use futures_util::Stream;
use tokio::sync::broadcast::error::RecvError;

use super::Gw;
use crate::Gateway;
use crate::auth::Caller;

/// The event stream route.
pub(super) fn routes() -> Router<Arc<Gateway>> {
    Router::new().route("/v1/events", get(events))
}

async fn events(
    State(gw): Gw,
    Extension(caller): Extension<Arc<Caller>>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let receiver = gw.events().subscribe();
    let stop = gw.close_streams.clone();
    let stream = futures_util::stream::unfold(
        (receiver, stop, caller),
        |(mut receiver, stop, caller)| async move {
            loop {
                let received = tokio::select! {
                    () = stop.cancelled() => return None,
                    r = receiver.recv() => r,
                };
                match received {
                    Ok(event) if caller.sees(&event.tool) => {
                        let sse = Event::default()
                            .event(event.name)
                            .json_data(&*event.data)
                            .unwrap_or_else(|_| Event::default().comment("unserializable event"));
                        return Some((Ok(sse), (receiver, stop, caller)));
                    }
                    Ok(_) => {}
                    Err(RecvError::Lagged(n)) => {
                        let sse = Event::default()
                            .event("lagged")
                            .data(format!("{{\"missed\":{n}}}"));
                        return Some((Ok(sse), (receiver, stop, caller)));
                    }
                    Err(RecvError::Closed) => return None,
                }
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}

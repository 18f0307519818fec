//! One write for a quick `POST /mcp` answer: the head and the event stream's priming event are
//! held until the stream's first message, so a call answered at once goes out in one write.
//!
//! rmcp answers a POST in a session with an event stream that opens with a priming event (an
//! event id and a `retry`, no data) for clients that resume streams. hyper writes a response's
//! head, and whatever of its body is ready, as soon as the handler returns it: the head and the
//! priming event went out in one write and the answer, a moment later, in a second. Each write
//! on a loopback connection wakes the client; for a trivial call that is a tenth of the
//! server's CPU per call. Held for at most [`HOLD`], the head, the priming event and the first
//! message (and the stream's end, when rmcp has closed it by then) leave together; a call that
//! takes longer sees its head after [`HOLD`], as before but later by that much.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;

/// The longest a POST's head waits for its stream's first message.
pub(crate) const HOLD: Duration = Duration::from_millis(20);

/// `response`, the answer to a request with `method`, with its head and priming events held for
/// the stream's first message (at most [`HOLD`]). Anything but a POST's event stream passes
/// unchanged.
pub(crate) async fn hold_priming(method: &Method, response: Response) -> Response {
    let streams = method == Method::POST
        && response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
    if !streams {
        return response;
    }
    let (parts, mut body) = response.into_parts();
    let mut held = VecDeque::new();
    let deadline = tokio::time::Instant::now() + HOLD;
    loop {
        match tokio::time::timeout_at(deadline, body.frame()).await {
            // Held; a priming event alone is no reason to write.
            Ok(Some(Ok(frame))) => {
                let priming = frame.data_ref().is_some_and(|data| is_priming(data));
                held.push_back(Ok(frame));
                if !priming {
                    break;
                }
            }
            // A broken stream: what was held, then the error, as hyper would have seen them.
            Ok(Some(Err(e))) => {
                held.push_back(Err(e));
                break;
            }
            // Ended, or slow: what was held goes out now.
            Ok(None) | Err(_) => break,
        }
    }
    Response::from_parts(parts, Body::new(Held { held, rest: body }))
}

/// Whether `data` is one server-sent event carrying no data: only field lines (`id:`,
/// `retry:`, comments) and `data:` lines that are empty.
fn is_priming(data: &[u8]) -> bool {
    data.split(|&b| b == b'\n').all(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        match line.strip_prefix(b"data:") {
            Some(value) => value.iter().all(|&b| b == b' '),
            None => true,
        }
    })
}

/// The frames read while holding, then the rest of the body.
struct Held {
    held: VecDeque<Result<Frame<Bytes>, axum::Error>>,
    rest: Body,
}

impl HttpBody for Held {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if let Some(frame) = self.held.pop_front() {
            return Poll::Ready(Some(frame));
        }
        Pin::new(&mut self.rest).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.held.is_empty() && self.rest.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        let held: u64 = self
            .held
            .iter()
            .filter_map(|f| f.as_ref().ok().and_then(Frame::data_ref))
            .map(|d| d.len() as u64)
            .sum();
        let rest = self.rest.size_hint();
        let mut hint = SizeHint::new();
        hint.set_lower(rest.lower() + held);
        if let Some(upper) = rest.upper() {
            hint.set_upper(upper + held);
        }
        hint
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;
    use futures_util::StreamExt;
    use tokio::sync::mpsc;

    fn sse(body: Body) -> Response {
        let mut response = Response::new(body);
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/event-stream"),
        );
        response
    }

    /// A streaming body fed by the returned sender.
    fn channel_body() -> (mpsc::UnboundedSender<Bytes>, Body) {
        let (tx, rx) = mpsc::unbounded_channel::<Bytes>();
        let stream = tokio_stream_of(rx).map(Ok::<_, std::io::Error>);
        (tx, Body::from_stream(stream))
    }

    fn tokio_stream_of(
        mut rx: mpsc::UnboundedReceiver<Bytes>,
    ) -> impl futures_util::Stream<Item = Bytes> + Send + 'static {
        futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }

    /// The frames the response's body yields without waiting, and whether it has ended.
    fn ready_frames(body: &mut Body) -> (Vec<Bytes>, bool) {
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut out = Vec::new();
        loop {
            match Pin::new(&mut *body).poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(frame))) => out.extend(frame.into_data().ok()),
                Poll::Ready(Some(Err(e))) => panic!("body error: {e}"),
                Poll::Ready(None) => return (out, true),
                Poll::Pending => return (out, false),
            }
        }
    }

    #[test]
    fn priming_events_are_events_without_data() {
        assert!(is_priming(b"data: \nid: 0/5\nretry: 3000\n\n"));
        assert!(is_priming(b"data:\r\nid: 0\r\n\r\n"));
        assert!(is_priming(b": keep-alive\n\n"));
        assert!(!is_priming(
            b"data: {\"jsonrpc\":\"2.0\",\"id\":5}\nid: 1/5\n\n"
        ));
        assert!(!is_priming(b"id: 1\ndata: x\n\n"));
    }

    #[tokio::test(start_paused = true)]
    async fn the_head_waits_for_the_first_message_and_leaves_with_it() {
        let (tx, body) = channel_body();
        tx.send(Bytes::from_static(b"data: \nid: 0/1\nretry: 3000\n\n"))
            .unwrap();
        let held = tokio::spawn(hold_priming(&Method::POST, sse(body)));
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert!(
            !held.is_finished(),
            "the head left with the priming event alone"
        );
        tx.send(Bytes::from_static(b"data: {\"id\":1}\n\n"))
            .unwrap();
        drop(tx);
        let response = held.await.unwrap();
        let mut body = response.into_body();
        let (frames, ended) = ready_frames(&mut body);
        assert_eq!(
            frames,
            [
                Bytes::from_static(b"data: \nid: 0/1\nretry: 3000\n\n"),
                Bytes::from_static(b"data: {\"id\":1}\n\n")
            ]
        );
        assert!(ended, "the stream's end was not ready with the message");
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_call_gets_its_head_after_the_hold() {
        let (tx, body) = channel_body();
        tx.send(Bytes::from_static(b"data: \nid: 0/1\n\n")).unwrap();
        let started = tokio::time::Instant::now();
        let response = hold_priming(&Method::POST, sse(body)).await;
        assert_eq!(started.elapsed(), HOLD);
        let mut body = response.into_body();
        let (frames, ended) = ready_frames(&mut body);
        assert_eq!(frames, [Bytes::from_static(b"data: \nid: 0/1\n\n")]);
        assert!(!ended);
        tx.send(Bytes::from_static(b"data: {\"id\":1}\n\n"))
            .unwrap();
        drop(tx);
        let (frames, ended) = ready_frames(&mut body);
        assert_eq!(frames, [Bytes::from_static(b"data: {\"id\":1}\n\n")]);
        assert!(ended);
    }

    #[tokio::test(start_paused = true)]
    async fn other_answers_pass_at_once() {
        let (_tx, body) = channel_body();
        // A GET's stream (the session's standalone stream) is not held.
        let response = tokio::time::timeout(
            Duration::from_millis(1),
            hold_priming(&Method::GET, sse(body)),
        )
        .await;
        assert!(response.is_ok());
        let json = Response::new(Body::from("{}"));
        let response =
            tokio::time::timeout(Duration::from_millis(1), hold_priming(&Method::POST, json))
                .await
                .unwrap();
        assert_eq!(
            response.into_body().collect().await.unwrap().to_bytes(),
            "{}"
        );
    }
}

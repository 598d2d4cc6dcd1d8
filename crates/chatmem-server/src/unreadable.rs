//! [`JsonRefusals`]: hyper's own answers to requests it cannot parse, in the one JSON shape.
//!
//! hyper answers a request head it cannot read (bytes outside HTTP's grammar, two
//! `Content-Length`s, a head over its buffer or over 100 header fields, a target over 64 KiB)
//! itself, before the router sees anything, with a fixed bodiless 400, 431 or 414, and offers
//! no hook to change it (its h1 role's `on_error`). This socket wrapper recognizes exactly that
//! answer as hyper writes it (a status line of one of those three, `content-length: 0`, nothing
//! after the head: the router never answers an error without a JSON body) and writes the one
//! JSON error shape in its place, with a request id, then hyper closes the connection as it
//! would have. It parses nothing of the request.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use axum::http::StatusCode;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::error::{ApiError, ErrorCode};

/// A connection's socket whose bodiless parse-error answers are rewritten as JSON.
#[derive(Debug)]
pub(crate) struct JsonRefusals<S> {
    inner: S,
    /// The JSON answer being written in place of hyper's, how much of it is written, and how
    /// many bytes hyper asked to write (what it is told was written).
    pending: Option<(Vec<u8>, usize, usize)>,
}

impl<S> JsonRefusals<S> {
    pub(crate) fn new(inner: S) -> Self {
        Self { inner, pending: None }
    }
}

/// The status of `buf` if it is hyper's bodiless answer to a request it could not parse.
fn bodiless_refusal(buf: &[u8]) -> Option<StatusCode> {
    let rest = buf.strip_prefix(b"HTTP/1.1 ")?;
    let status = match rest.get(..4)? {
        b"400 " => StatusCode::BAD_REQUEST,
        b"414 " => StatusCode::URI_TOO_LONG,
        b"431 " => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        _ => return None,
    };
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let no_length = buf[..head_end]
        .split(|&b| b == b'\n')
        .any(|line| line.eq_ignore_ascii_case(b"content-length: 0\r"));
    (head_end == buf.len() && no_length).then_some(status)
}

/// The JSON answer written in place of hyper's bodiless `status`.
fn json_refusal(status: StatusCode) -> Vec<u8> {
    let (code, message) = match status {
        StatusCode::URI_TOO_LONG => (ErrorCode::UriTooLong, "the request target is over 64 KiB"),
        StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE => (
            ErrorCode::HeaderTooLarge,
            "the request head is over 256 KiB or has more than 100 header fields",
        ),
        _ => (
            ErrorCode::BadRequest,
            "the request is not valid HTTP/1.1 (bytes outside the grammar, or conflicting Content-Length or Transfer-Encoding headers)",
        ),
    };
    let id = format!("{:016x}", fastrand::u64(..));
    tracing::info!(request_id = %id, status = status.as_u16(), "refused a request the HTTP parser could not read");
    let body = ApiError::new(status, code, message).with_request_id(&id).body_json();
    let mut answer = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\nx-request-id: {id}\r\n\r\n",
        status.as_u16(),
        status.canonical_reason().unwrap_or(""),
        body.len()
    )
    .into_bytes();
    answer.extend_from_slice(&body);
    answer
}

impl<S: AsyncWrite + Unpin> JsonRefusals<S> {
    /// Writes the pending JSON answer; once all of it is out, reports hyper's bytes written.
    fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let Some((answer, written, asked)) = &mut self.pending else {
            return Poll::Ready(Ok(0));
        };
        while *written < answer.len() {
            match Pin::new(&mut self.inner).poll_write(cx, &answer[*written..]) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => *written += n,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        let asked = *asked;
        self.pending = None;
        Poll::Ready(Ok(asked))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonRefusals<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonRefusals<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        if self.pending.is_none()
            && let Some(status) = bodiless_refusal(buf)
        {
            self.pending = Some((json_refusal(status), 0, buf.len()));
        }
        if self.pending.is_some() {
            return self.poll_pending(cx);
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut filled = bufs.iter().filter(|b| !b.is_empty());
        if let (Some(only), None) = (filled.next(), filled.next())
            && (self.pending.is_some() || bodiless_refusal(only).is_some())
        {
            return self.poll_write(cx, only);
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.pending.is_some() {
            match self.poll_pending(cx) {
                Poll::Ready(Ok(_)) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_hypers_bodiless_refusals_are_recognized() {
        let hyper = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\ndate: Tue, 01 Dec 2026 16:00:00 GMT\r\n\r\n";
        assert_eq!(bodiless_refusal(hyper), Some(StatusCode::BAD_REQUEST));
        let hyper = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n\r\n";
        assert_eq!(
            bodiless_refusal(hyper),
            Some(StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE)
        );
        // The router's errors carry their JSON body; other statuses are never hyper's refusals.
        let ours = b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 42\r\n\r\n";
        assert_eq!(bodiless_refusal(ours), None);
        let with_body = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\nx";
        assert_eq!(bodiless_refusal(with_body), None);
        assert_eq!(
            bodiless_refusal(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n"),
            None
        );
        assert_eq!(bodiless_refusal(b"HTTP/1.1 204 No Content\r\n\r\n"), None);
        assert_eq!(
            bodiless_refusal(b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n"),
            None
        );
    }

    #[test]
    fn the_json_refusal_is_one_whole_response_in_the_one_shape() {
        let answer = json_refusal(StatusCode::BAD_REQUEST);
        let text = String::from_utf8(answer).expect("text");
        let (head, body) = text.split_once("\r\n\r\n").expect("a head");
        assert!(head.starts_with("HTTP/1.1 400 Bad Request\r\n"), "{head}");
        assert!(head.contains(&format!("content-length: {}\r\n", body.len())), "{head}");
        let json: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(json["error"]["code"], "bad_request");
        assert!(head.contains(&format!(
            "x-request-id: {}",
            json["error"]["request_id"].as_str().unwrap_or("?")
        )));
    }
}

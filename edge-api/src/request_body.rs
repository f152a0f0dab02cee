//! Reading a request's body within a limit. A body that declares its length is refused by it
//! before any of it is kept; one that does not (chunked) is read chunk by chunk and refused as
//! soon as it passes the limit, so no body is ever held past it.
//!
//! A refused body is still taken from the client, and thrown away chunk by chunk, up to
//! [`DRAIN_CAP_BYTES`]: answering before the body is consumed left the runtime's connection with
//! the unread bytes on it, and under `wrangler dev` the next request on it failed ("Your worker
//! restarted mid-request"). A body past the cap is cancelled instead.

use futures::StreamExt;
use worker::Request;

use crate::{Error, Result};

/// How much of a refused body is read and thrown away rather than cancelled.
const DRAIN_CAP_BYTES: usize = 8 << 20;

/// The body of `request` as UTF-8 text, at most `max` bytes; an absent body is empty.
pub(crate) async fn read_text(request: &mut Request, max: usize) -> Result<String> {
    let declared = request.headers().get("content-length")?.and_then(|length| length.parse::<usize>().ok());
    if request.inner().body().is_none() {
        return Ok(String::new());
    }
    let mut chunks = request.stream()?;
    if let Some(length) = declared.filter(|length| *length > max) {
        if length > DRAIN_CAP_BYTES {
            drop(chunks); // cancels the stream: the runtime stops taking it
        } else {
            drain(&mut chunks, DRAIN_CAP_BYTES).await;
        }
        return Err(too_long(&length.to_string(), max));
    }
    let mut body = Vec::with_capacity(declared.unwrap_or(0).min(max));
    while let Some(chunk) = chunks.next().await {
        body.extend_from_slice(&chunk?);
        if body.len() > max {
            drain(&mut chunks, DRAIN_CAP_BYTES - body.len().min(DRAIN_CAP_BYTES)).await;
            return Err(too_long(&format!("more than {max}"), max));
        }
    }
    String::from_utf8(body).map_err(|_| Error::BadBody("the body is not UTF-8 text".into()))
}

/// Reads and throws away the rest of `chunks`, at most `cap` bytes of it.
async fn drain(chunks: &mut worker::ByteStream, cap: usize) {
    let mut read = 0;
    while read <= cap {
        match chunks.next().await {
            Some(Ok(chunk)) => read += chunk.len(),
            Some(Err(_)) | None => return,
        }
    }
}

fn too_long(length: &str, max: usize) -> Error {
    Error::BadBody(format!("the body is {length} bytes; at most {max} are accepted"))
}

//! The one place where each [`Error`] gets its HTTP status. The error type itself knows nothing
//! of HTTP ([`crate::error`]), so the rules that raise it stay free of the server.

use warp::http::StatusCode;

use crate::error::Error;

/// The HTTP status an error is answered with.
pub(crate) fn status_of(error: &Error) -> StatusCode {
    match error {
        Error::MissingRequestOrSignature
        | Error::BadRequest(_)
        | Error::NotExactCall(_)
        | Error::DeadlineTooNear { .. }
        | Error::ConsentDeadlineTooNear { .. }
        | Error::ConsentDeadlineTooFar { .. } => StatusCode::BAD_REQUEST,
        Error::InvalidSignature => StatusCode::UNAUTHORIZED,
        Error::WrongTarget | Error::ValueTransfer | Error::GasAboveCap { .. } => StatusCode::FORBIDDEN,
        Error::NotFound | Error::RelayNotFound => StatusCode::NOT_FOUND,
        Error::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        Error::LengthRequired => StatusCode::LENGTH_REQUIRED,
        Error::IpRateLimited(_)
        | Error::SignerRateLimited(_)
        | Error::BudgetExhausted
        | Error::BudgetSliceSpent { .. }
        | Error::SignerShareExhausted(_)
        | Error::ClientShareExhausted(_)
        | Error::ReadRateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
        Error::BalanceTooLow
        | Error::NoFreeLane
        | Error::LaneLost(_)
        | Error::Withheld { .. }
        | Error::StoreUnavailable(_)
        | Error::StoreTimedOut(_) => StatusCode::SERVICE_UNAVAILABLE,
        Error::Reverted(_)
        | Error::Rpc(_)
        | Error::Unconfirmed { .. }
        | Error::Store(_)
        | Error::StoreCorrupt(_)
        | Error::Internal(_)
        | Error::Config(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every failure a send releases a relay with reads back from its record as itself: the
    /// same status and words, for a standby's client as for the sender's.
    #[test]
    fn a_released_relays_failure_reads_back_as_itself() {
        for error in [
            Error::NoFreeLane,
            Error::BalanceTooLow,
            Error::InvalidSignature,
            Error::StoreUnavailable("57014: canceling statement due to lock timeout".into()),
            Error::StoreTimedOut("reserve".into()),
            Error::Rpc("insufficient funds for gas * price + value".into()),
            Error::Store("23505: duplicate key".into()),
            Error::StoreCorrupt("a wei amount".into()),
            Error::Internal("relay task failed".into()),
        ] {
            let read = Error::of_released(&error.to_string());
            assert_eq!(
                (status_of(&read), read.to_string()),
                (status_of(&error), error.to_string()),
                "{error:?}"
            );
        }
        let unknown = Error::of_released("something else");
        assert_eq!(
            (status_of(&unknown), unknown.to_string()),
            (StatusCode::INTERNAL_SERVER_ERROR, "RPC request failed; try again later".into())
        );
    }
}

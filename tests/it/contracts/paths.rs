//! How a contract test's call reaches the registry: by a direct transaction, or as a forward
//! request its caller signs and the relayer account executes (ERC-2771), with the refusal read
//! the same way from either, so each rule can be shown by both paths.

use alloy::{
    network::TransactionBuilder,
    primitives::{Bytes, U256, aliases::U48},
    rpc::types::{TransactionReceipt, TransactionRequest},
    signers::{SignerSync, local::PrivateKeySigner},
    sol_types::{Revert, SolCall, SolError, SolEvent},
};
use kya_core::{
    chain::abi::Forwarder,
    registry::forward_request::{self, ForwardRequest},
};
use kya_devchain::{
    TxError,
    dev_accounts::{self, Role},
};
use kya_tests::TestChain;

/// The listed tests, each an `async fn(Via)`, as `direct::name` and `forwarded::name`.
macro_rules! on_both_paths {
    ($($name:ident),* $(,)?) => {
        mod direct {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Via::Direct).await;
            })*
        }
        mod forwarded {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Via::Forwarder).await;
            })*
        }
    };
}
pub(super) use on_both_paths;

/// How a call reaches the registry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Via {
    /// A transaction from the caller's own account (given ETH for gas first: the tests' keys are
    /// fresh).
    Direct,
    /// A forward request the caller signs, executed by the relayer account.
    Forwarder,
}

/// Gas a forward request gives the registry: enough to store a 1,024-byte scope.
const FORWARDED_GAS: u64 = 3_000_000;

/// Sends `call` to the registry as `caller`, `via` either path. Through the forwarder a failing
/// inner call does not revert `execute`: its reason is read from a simulation of the same
/// `execute`, which is then sent all the same (the request's nonce is used, and nothing else
/// changes), so a refusal is `TxError::Reverted` with the registry's reason either way.
pub(super) async fn send<C: SolCall>(
    t: &TestChain,
    via: Via,
    caller: &PrivateKeySigner,
    call: &C,
) -> Result<TransactionReceipt, TxError> {
    send_data(t, via, caller, call.abi_encode()).await
}

/// [`send`] of call data encoded already (a list of calls of several functions).
pub(super) async fn send_data(
    t: &TestChain,
    via: Via,
    caller: &PrivateKeySigner,
    data: Vec<u8>,
) -> Result<TransactionReceipt, TxError> {
    match via {
        Via::Direct => {
            t.chain.impersonate(caller.address()).await?;
            let request = TransactionRequest::default()
                .with_from(caller.address())
                .with_to(t.registry())
                .with_input(data);
            t.chain.send_request(request).await
        }
        Via::Forwarder => forwarded(t, caller, data).await,
    }
}

async fn forwarded(
    t: &TestChain,
    signer: &PrivateKeySigner,
    data: Vec<u8>,
) -> Result<TransactionReceipt, TxError> {
    let nonce = t.chain.view(t.forwarder(), &Forwarder::getNonceCall { from: signer.address() }).await?;
    let request = ForwardRequest {
        from: signer.address(),
        to: t.registry(),
        value: U256::ZERO,
        gas: U256::from(FORWARDED_GAS),
        nonce,
        deadline: U48::ZERO,
        data: data.into(),
    };
    let digest =
        forward_request::signing_digest(&request, &forward_request::domain(t.chain_id(), t.forwarder()));
    let signature =
        Bytes::from(signer.sign_hash_sync(&digest).expect("a local key signs").as_bytes().to_vec());
    let execute = Forwarder::executeCall { req: request, signature };
    let relayer = dev_accounts::address(Role::Relayer);
    let simulated = t.chain.view_from(relayer, t.forwarder(), &execute).await?;
    let receipt = t.chain.send(relayer, t.forwarder(), &execute).await?;
    let executed = receipt
        .inner
        .logs()
        .iter()
        .filter(|log| log.address() == t.forwarder())
        .find_map(|log| Forwarder::Executed::decode_log_data(log.data()).ok())
        .expect("an Executed event");
    assert_eq!((executed.from, executed.nonce), (signer.address(), nonce));
    assert_eq!(executed.success, simulated._0, "the request ran as its simulation did");
    let used = t.chain.view(t.forwarder(), &Forwarder::getNonceCall { from: signer.address() }).await?;
    assert_eq!(used, nonce + U256::from(1), "the request's nonce is used either way");
    if executed.success {
        Ok(receipt)
    } else {
        let reason = <Revert as SolError>::abi_decode(&simulated._1).expect("a revert with a reason").reason;
        Err(TxError::Reverted(reason))
    }
}

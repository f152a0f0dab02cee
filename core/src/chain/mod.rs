//! Reading the chain, with no I/O: the contracts' bindings, the JSON-RPC requests that read them
//! at one block, and the decoding of the answers. Callers send the requests themselves.
//!
//! - [`abi`]: Solidity bindings of the registry, the forwarder, Multicall3 and `GasPriceOracle`.
//! - [`rpc`]: JSON-RPC plans of `eth_call`s at one block (plain batches), and their decoders.
//! - [`multicall`]: those plans read through Multicall3, starved calls planned again in pieces.
//! - [`revert`]: the one decoder of reverts, for every shape node software reports them in.
//! - [`retry`]: when a JSON-RPC request is sent again, and after how long.
//! - [`redact`]: RPC URLs without the API keys hosted nodes put in them.

pub mod abi;
pub mod multicall;
pub mod redact;
pub mod retry;
pub mod revert;
pub mod rpc;

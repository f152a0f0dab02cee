// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title Forwarder
/// @notice ERC-2771 trusted forwarder for gasless meta-transactions to the agent registry.
/// A relayer submits a `ForwardRequest` signed (EIP-712) by `from`; the forwarder checks the
/// signature, the nonce and the deadline, then calls `to` with `from` appended to the calldata,
/// which ERC-2771 recipients read back as `_msgSender()`.
/// @dev The EIP-712 domain name is `MinimalForwarder`, version `1`, to stay signature-compatible
/// with the forwarder deployed beside the public registry.
contract Forwarder is EIP712 {
    struct ForwardRequest {
        address from;
        address to;
        uint256 value;
        uint256 gas;
        uint256 nonce;
        uint48 deadline;
        bytes data;
    }

    bytes32 private constant _FORWARD_REQUEST_TYPEHASH = keccak256(
        "ForwardRequest(address from,address to,uint256 value,uint256 gas,uint256 nonce,uint48 deadline,bytes data)"
    );

    mapping(address => uint256) private _nonces;

    /// @notice A request was executed; `success` is false when the target call reverted.
    event Executed(address indexed from, uint256 indexed nonce, bool success);

    constructor() EIP712("MinimalForwarder", "1") {}

    /// @notice The nonce the next request of `from` must carry.
    function getNonce(address from) external view returns (uint256) {
        return _nonces[from];
    }

    /// @notice True when `signature` is `req.from`'s signature over `req`, the nonce is current
    /// and the deadline (0 = none) has not passed. Reverts on a signature that is not 65 bytes.
    function verify(ForwardRequest calldata req, bytes calldata signature) public view returns (bool) {
        (uint8 v, bytes32 r, bytes32 s) = _splitSignature(signature);
        (address signer, ECDSA.RecoverError err,) = ECDSA.tryRecover(_hashRequest(req), v, r, s);
        return err == ECDSA.RecoverError.NoError && signer == req.from && _nonces[req.from] == req.nonce
            && (req.deadline == 0 || block.timestamp <= req.deadline);
    }

    /// @notice Executes `req` as `req.from`. Does not revert when the target call fails: the
    /// nonce is consumed and `(false, revertData)` is returned, so callers simulate first.
    function execute(ForwardRequest calldata req, bytes calldata signature)
        external
        payable
        returns (bool, bytes memory)
    {
        require(verify(req, signature), "Forwarder: invalid signature");
        require(msg.value == req.value, "Forwarder: value mismatch");
        _nonces[req.from] = req.nonce + 1;

        (bool success, bytes memory returndata) =
            req.to.call{gas: req.gas, value: req.value}(abi.encodePacked(req.data, req.from));

        // EIP-150 passes at most 63/64 of the remaining gas to a call. If the relayer gave too
        // little gas, the inner call may have run out while this transaction would still succeed
        // and burn the nonce; fail the whole transaction instead (as OpenZeppelin's forwarders do).
        if (gasleft() <= req.gas / 63) {
            assembly {
                invalid()
            }
        }

        emit Executed(req.from, req.nonce, success);
        return (success, returndata);
    }

    function _hashRequest(ForwardRequest calldata req) private view returns (bytes32) {
        return _hashTypedDataV4(
            keccak256(
                abi.encode(
                    _FORWARD_REQUEST_TYPEHASH,
                    req.from,
                    req.to,
                    req.value,
                    req.gas,
                    req.nonce,
                    req.deadline,
                    keccak256(req.data)
                )
            )
        );
    }

    function _splitSignature(bytes calldata signature) private pure returns (uint8 v, bytes32 r, bytes32 s) {
        require(signature.length == 65, "Forwarder: invalid signature length");
        r = bytes32(signature[0:32]);
        s = bytes32(signature[32:64]);
        v = uint8(signature[64]);
    }
}

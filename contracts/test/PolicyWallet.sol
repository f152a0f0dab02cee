// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC1271} from "@openzeppelin/contracts/interfaces/IERC1271.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";

/// @title PolicyWallet
/// @notice A contract account for tests: it accepts an ERC-1271 signature when its owner's key
/// signed the hash and its policy is to accept, so a test can show one contract wallet's consent
/// (or signed request) passing and then, with the policy switched off, being refused.
contract PolicyWallet is IERC1271 {
    address public immutable owner;
    bool public accepting = true;

    constructor(address owner_) {
        owner = owner_;
    }

    /// @notice Owner only: whether signatures by the owner's key count as this wallet's.
    function setAccepting(bool accepting_) external {
        require(msg.sender == owner, "Only owner");
        accepting = accepting_;
    }

    function isValidSignature(bytes32 hash, bytes calldata signature) external view returns (bytes4) {
        (address signer, ECDSA.RecoverError error,) = ECDSA.tryRecover(hash, signature);
        if (accepting && error == ECDSA.RecoverError.NoError && signer == owner) {
            return IERC1271.isValidSignature.selector;
        }
        return 0xffffffff;
    }
}

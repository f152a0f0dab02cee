// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// The part of Multicall3 (mds1/multicall3, deployed at 0xcA11bde05977b3631167028862bE2a173976CA11
/// on most EVM chains) that the edge API reads through. Its runtime code for the local chain comes
/// from viem's `multicall3Bytecode` (see contracts/compile.mjs), not from this file.
interface IMulticall3 {
    struct Call3 {
        address target;
        bool allowFailure;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    function aggregate3(Call3[] calldata calls) external payable returns (Result[] memory returnData);

    function getBlockNumber() external view returns (uint256 blockNumber);

    function getCurrentBlockTimestamp() external view returns (uint256 timestamp);
}

// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {AgentRegistry} from "../src/AgentRegistry.sol";

/// @title HostileRegistry (tests only)
/// @notice What a stranger can write into a registry like the one deployed on Base Sepolia, which
/// limits no string and no number of writes per block: the registry's read functions and events
/// with our AgentRegistry's ABI (its own types and events, imported), and write
/// functions with no checks that make many agents, reports or events in one call. The index's
/// end-to-end tests (tests/it/edge_api/index_attacks.rs) point the Worker at it: 200 KB strings, thousands
/// of currencies, a block with more logs than a provider answers, a block touching thousands of
/// agents. Never deployed.
contract HostileRegistry {
    uint256 public nextAgentId = 1;
    /// Read beside `nextAgentId` by every reader of standing, as the registry's.
    uint256 public attestationGracePeriod = 7 days;

    mapping(uint256 => AgentRegistry.AgentRecord) private _agents;
    mapping(uint256 => uint256[]) private _children;
    mapping(uint256 => AgentRegistry.RevenueReport[]) private _revenue;

    /// @notice Registers `count` root agents in one call, each with `operationalScope`, its wallet
    /// derived from its id.
    function registerMany(uint256 count, string calldata operationalScope) external {
        for (uint256 i = 0; i < count; i++) {
            uint256 agentId = nextAgentId++;
            address wallet = address(uint160(uint256(keccak256(abi.encode("wallet", agentId)))));
            AgentRegistry.AgentRecord storage agent = _agents[agentId];
            agent.agentId = agentId;
            agent.creator = msg.sender;
            agent.haftungsperson = msg.sender;
            agent.agentWallet = wallet;
            agent.operationalScope = operationalScope;
            agent.registeredAt = uint64(block.timestamp);
            agent.lastAttestation = uint64(block.timestamp);
            emit AgentRegistry.AgentRegistered(agentId, msg.sender, wallet, msg.sender, 0, 0);
        }
    }

    /// @notice Attests agents `from` to `to` (inclusive), `times` times each: one block can touch
    /// thousands of agents, or hold thousands of logs of one.
    function attestMany(uint256 from, uint256 to, uint256 times) external {
        for (uint256 agentId = from; agentId <= to; agentId++) {
            _agents[agentId].lastAttestation = uint64(block.timestamp);
            for (uint256 i = 0; i < times; i++) {
                emit AgentRegistry.ComplianceAttested(agentId, msg.sender, uint64(block.timestamp));
            }
        }
    }

    /// @notice One revenue report of any currency and category, however long.
    function reportRevenue(uint256 agentId, uint256 amount, string calldata currency, string calldata category)
        external
    {
        _report(agentId, amount, currency, category);
    }

    /// @notice `count` reports of agent `agentId`, each in a currency of its own
    /// (`prefix` and the report's number in decimal).
    function reportManyCurrencies(uint256 agentId, uint256 count, string calldata prefix) external {
        uint256 start = _revenue[agentId].length;
        for (uint256 i = 0; i < count; i++) {
            _report(agentId, i + 1, string.concat(prefix, _decimal(start + i)), "api");
        }
    }

    /// @notice Appends `words` to agent `agentId`'s operational scope, whose length becomes
    /// `length` bytes: a string of 200 KB costs more gas than one transaction may use, so it is
    /// written over several (32-byte words, in the storage layout of a long `string`). Each call
    /// touches the agent (a `ComplianceAttested` log), so an indexer reads it again.
    function appendScope(uint256 agentId, bytes32[] calldata words, uint256 length) external {
        _append(bytes(_agents[agentId].operationalScope), words, length);
        emit AgentRegistry.ComplianceAttested(agentId, msg.sender, _agents[agentId].lastAttestation);
    }

    /// @notice Appends to the currency (`field` 0) or the category (1) of agent `agentId`'s
    /// report `index`, as [`appendScope`] does.
    function appendReport(uint256 agentId, uint256 index, uint256 field, bytes32[] calldata words, uint256 length)
        external
    {
        AgentRegistry.RevenueReport storage report = _revenue[agentId][index];
        _append(bytes(field == 0 ? report.currency : report.category), words, length);
        emit AgentRegistry.ComplianceAttested(agentId, msg.sender, _agents[agentId].lastAttestation);
    }

    /// @dev Writes `words` after the whole words `target` holds (a long string, or an empty one)
    /// and sets its length to `length`.
    function _append(bytes storage target, bytes32[] calldata words, uint256 length) private {
        uint256 held = target.length;
        require(held % 32 == 0 && length <= held + words.length * 32 && length > 31, "Whole words only");
        uint256 slot;
        assembly {
            slot := target.slot
        }
        uint256 data = uint256(keccak256(abi.encode(slot)));
        uint256 first = data + held / 32;
        for (uint256 i = 0; i < words.length; i++) {
            bytes32 word = words[i];
            uint256 at = first + i;
            assembly {
                sstore(at, word)
            }
        }
        assembly {
            sstore(slot, add(mul(length, 2), 1))
        }
    }

    function _report(uint256 agentId, uint256 amount, string memory currency, string memory category) private {
        _revenue[agentId].push(
            AgentRegistry.RevenueReport({
                agentId: agentId,
                amount: amount,
                currency: currency,
                category: category,
                periodStart: 1,
                periodEnd: 2,
                reportedAt: uint64(block.timestamp)
            })
        );
        _agents[agentId].lastRevenueReport = uint64(block.timestamp);
        emit AgentRegistry.RevenueReported(agentId, amount, currency, category, 1, 2);
    }

    function _decimal(uint256 value) private pure returns (string memory) {
        if (value == 0) return "0";
        uint256 digits;
        for (uint256 rest = value; rest != 0; rest /= 10) digits++;
        bytes memory text = new bytes(digits);
        for (; value != 0; value /= 10) text[--digits] = bytes1(uint8(48 + (value % 10)));
        return string(text);
    }

    function getAgent(uint256 agentId) external view returns (AgentRegistry.AgentRecord memory) {
        require(agentId != 0 && agentId < nextAgentId, "Agent not found");
        return _agents[agentId];
    }

    function getChildren(uint256 agentId) external view returns (uint256[] memory) {
        return _children[agentId];
    }

    function getRevenueHistory(uint256 agentId) external view returns (AgentRegistry.RevenueReport[] memory) {
        return _revenue[agentId];
    }
}

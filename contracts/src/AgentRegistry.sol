// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";

/// @title AgentRegistry
/// @notice On-chain registry of autonomous AI agents: identity, lineage, liability
/// (Haftungsperson), compliance attestations and revenue reports.
/// @dev ABI-compatible with the registry deployed on Base Sepolia (see INTERFACE.md section 1):
/// same signatures, struct field order and status enum. Every function reads the caller through
/// ERC-2771 `_msgSender()`, so requests relayed by the trusted forwarder act as their signer.
contract AgentRegistry is ERC2771Context {
    enum AgentStatus {
        Active,
        Suspended,
        Revoked,
        Terminated
    }

    struct AgentRecord {
        uint256 agentId;
        address creator;
        address haftungsperson;
        address agentWallet;
        bytes32 constitutionHash;
        bytes32 capabilityHash;
        string operationalScope;
        uint256 parentAgentId;
        uint256 generation;
        bool selfModifying;
        uint64 registeredAt;
        uint64 lastAttestation;
        uint64 lastRevenueReport;
        AgentStatus status;
    }

    struct RevenueReport {
        uint256 agentId;
        uint256 amount;
        string currency;
        string category;
        uint64 periodStart;
        uint64 periodEnd;
        uint64 reportedAt;
    }

    address public owner;
    /// @notice Ids start at 1, so the number of agents ever registered is `nextAgentId - 1`.
    uint256 public nextAgentId = 1;
    uint256 public attestationGracePeriod = 7 days;
    uint256 public maxGenerationDepth = 10;

    mapping(address => bool) public isRegulator;
    /// @notice Agent id owning a wallet; 0 means none. A terminated agent frees its wallet; a revoked
    /// one keeps it, so the wallet can never be registered again (a regulator's sanction sticks).
    mapping(address => uint256) public walletToAgent;

    mapping(uint256 => AgentRecord) private _agents;
    mapping(uint256 => uint256[]) private _children;
    mapping(uint256 => RevenueReport[]) private _revenue;

    event AgentRegistered(
        uint256 indexed agentId,
        address indexed creator,
        address indexed agentWallet,
        address haftungsperson,
        uint256 parentAgentId,
        uint256 generation
    );
    event ComplianceAttested(uint256 indexed agentId, address indexed attester, uint64 attestedAt);
    event RevenueReported(
        uint256 indexed agentId,
        uint256 amount,
        string currency,
        string category,
        uint64 periodStart,
        uint64 periodEnd
    );
    event AgentSuspended(uint256 indexed agentId, address indexed regulator);
    event AgentReactivated(uint256 indexed agentId, address indexed regulator);
    event AgentRevoked(uint256 indexed agentId, address indexed regulator);
    event AgentTerminated(uint256 indexed agentId, address indexed caller);
    event RegulatorAdded(address indexed regulator);
    event RegulatorRemoved(address indexed regulator);
    event AttestationGracePeriodUpdated(uint256 previousSeconds, uint256 newSeconds);
    event MaxGenerationDepthUpdated(uint256 previousDepth, uint256 newDepth);

    modifier onlyOwner() {
        require(_msgSender() == owner, "Only owner");
        _;
    }

    modifier onlyRegulator() {
        address caller = _msgSender();
        require(isRegulator[caller] || caller == owner, "Only regulator");
        _;
    }

    modifier agentExists(uint256 agentId) {
        require(_exists(agentId), "Agent not found");
        _;
    }

    modifier agentActive(uint256 agentId) {
        require(_agents[agentId].status == AgentStatus.Active, "Agent not active");
        _;
    }

    constructor(address trustedForwarder) ERC2771Context(trustedForwarder) {
        owner = msg.sender;
    }

    // ---------------------------------------------------------------- registration

    /// @notice Registers an agent. A child (parentAgentId != 0) needs an Active parent, sits one
    /// generation below it (at most `maxGenerationDepth`) and inherits its Haftungsperson, so only
    /// the parent's agent wallet, creator or Haftungsperson may register it.
    /// @dev Checks, in this order: the wallet is not zero; for a child, the parent exists
    /// ("Parent agent not found"), the caller may act for it ("Not authorized for this agent"),
    /// it is Active ("Parent agent not active") and the child stays within the depth ("Max
    /// generation depth exceeded"), as `_requireAgentWrite` orders its checks (a stranger learns
    /// nothing about a parent's status); last, the wallet is not bound to any agent, including a
    /// revoked one ("Wallet already registered to another agent").
    function registerAgent(
        address haftungsperson,
        address agentWallet,
        bytes32 constitutionHash,
        bytes32 capabilityHash,
        string calldata operationalScope,
        uint256 parentAgentId,
        bool selfModifying
    ) external returns (uint256) {
        require(agentWallet != address(0), "Agent wallet must not be zero");
        uint256 generation = 0;
        address liablePerson = haftungsperson;
        if (parentAgentId != 0) {
            (generation, liablePerson) = _placeChild(parentAgentId);
        }
        require(walletToAgent[agentWallet] == 0, "Wallet already registered to another agent");

        uint256 agentId = nextAgentId++;
        uint64 now64 = uint64(block.timestamp);
        AgentRecord storage agent = _agents[agentId];
        agent.agentId = agentId;
        agent.creator = _msgSender();
        agent.haftungsperson = liablePerson;
        agent.agentWallet = agentWallet;
        agent.constitutionHash = constitutionHash;
        agent.capabilityHash = capabilityHash;
        agent.operationalScope = operationalScope;
        agent.parentAgentId = parentAgentId;
        agent.generation = generation;
        agent.selfModifying = selfModifying;
        agent.registeredAt = now64;
        agent.lastAttestation = now64;
        agent.status = AgentStatus.Active;

        walletToAgent[agentWallet] = agentId;
        if (parentAgentId != 0) {
            _children[parentAgentId].push(agentId);
        }

        emit AgentRegistered(agentId, agent.creator, agentWallet, liablePerson, parentAgentId, generation);
        return agentId;
    }

    // ---------------------------------------------------------------- agent-level writes

    function attestCompliance(uint256 agentId) external {
        _requireAgentWrite(agentId);
        uint64 now64 = uint64(block.timestamp);
        _agents[agentId].lastAttestation = now64;
        emit ComplianceAttested(agentId, _msgSender(), now64);
    }

    /// @param amount in cents of `currency`.
    function reportRevenue(
        uint256 agentId,
        uint256 amount,
        string calldata currency,
        string calldata category,
        uint64 periodStart,
        uint64 periodEnd
    ) external {
        _requireAgentWrite(agentId);
        RevenueReport storage report = _revenue[agentId].push();
        report.agentId = agentId;
        report.amount = amount;
        report.currency = currency;
        report.category = category;
        report.periodStart = periodStart;
        report.periodEnd = periodEnd;
        report.reportedAt = uint64(block.timestamp);
        _agents[agentId].lastRevenueReport = uint64(block.timestamp);
        emit RevenueReported(agentId, amount, currency, category, periodStart, periodEnd);
    }

    /// @notice Permanently ends the agent and frees its wallet, so its owner may register afresh.
    function terminateSelf(uint256 agentId) external {
        _requireAgentWrite(agentId);
        AgentRecord storage agent = _agents[agentId];
        agent.status = AgentStatus.Terminated;
        delete walletToAgent[agent.agentWallet];
        emit AgentTerminated(agentId, _msgSender());
    }

    // ---------------------------------------------------------------- regulator writes

    function suspendAgent(uint256 agentId) external onlyRegulator agentExists(agentId) agentActive(agentId) {
        _agents[agentId].status = AgentStatus.Suspended;
        emit AgentSuspended(agentId, _msgSender());
    }

    function reactivateAgent(uint256 agentId) external onlyRegulator agentExists(agentId) {
        require(_agents[agentId].status == AgentStatus.Suspended, "Only suspended agents can be reactivated");
        _agents[agentId].status = AgentStatus.Active;
        emit AgentReactivated(agentId, _msgSender());
    }

    /// @notice Permanently revokes an Active or Suspended agent. Its wallet stays bound to the
    /// revoked record: `isRegistered` stays true, `getAgentByWallet` returns the record, and the
    /// wallet cannot be registered again, so re-registering does not undo the sanction.
    function revokeAgent(uint256 agentId) external onlyRegulator agentExists(agentId) {
        AgentStatus status = _agents[agentId].status;
        require(
            status == AgentStatus.Active || status == AgentStatus.Suspended, "Agent already revoked or terminated"
        );
        _agents[agentId].status = AgentStatus.Revoked;
        emit AgentRevoked(agentId, _msgSender());
    }

    // ---------------------------------------------------------------- owner writes

    function addRegulator(address regulator) external onlyOwner {
        isRegulator[regulator] = true;
        emit RegulatorAdded(regulator);
    }

    function removeRegulator(address regulator) external onlyOwner {
        isRegulator[regulator] = false;
        emit RegulatorRemoved(regulator);
    }

    function setAttestationGracePeriod(uint256 seconds_) external onlyOwner {
        emit AttestationGracePeriodUpdated(attestationGracePeriod, seconds_);
        attestationGracePeriod = seconds_;
    }

    function setMaxGenerationDepth(uint256 depth) external onlyOwner {
        emit MaxGenerationDepthUpdated(maxGenerationDepth, depth);
        maxGenerationDepth = depth;
    }

    // ---------------------------------------------------------------- views

    function getAgent(uint256 agentId) external view agentExists(agentId) returns (AgentRecord memory) {
        return _agents[agentId];
    }

    /// @notice The agent bound to `wallet`, a revoked one included (a terminated agent's wallet is free).
    function getAgentByWallet(address wallet) external view returns (AgentRecord memory) {
        uint256 agentId = walletToAgent[wallet];
        require(agentId != 0, "No agent registered for this wallet");
        return _agents[agentId];
    }

    /// @notice True while `wallet` is bound to an agent: Active, Suspended or Revoked.
    function isRegistered(address wallet) external view returns (bool) {
        return walletToAgent[wallet] != 0;
    }

    function isRegisteredAndCompliant(address wallet) external view returns (bool) {
        uint256 agentId = walletToAgent[wallet];
        return agentId != 0 && _isCompliant(_agents[agentId]);
    }

    function getChildren(uint256 agentId) external view returns (uint256[] memory) {
        return _children[agentId];
    }

    function getRevenueHistory(uint256 agentId) external view returns (RevenueReport[] memory) {
        return _revenue[agentId];
    }

    function complianceStatus(uint256 agentId)
        external
        view
        agentExists(agentId)
        returns (
            bool isActive,
            bool attestationCurrent,
            uint64 secondsSinceAttestation,
            uint256 childCount,
            uint8 status
        )
    {
        AgentRecord storage agent = _agents[agentId];
        isActive = agent.status == AgentStatus.Active;
        secondsSinceAttestation = uint64(block.timestamp) - agent.lastAttestation;
        attestationCurrent = secondsSinceAttestation <= attestationGracePeriod;
        childCount = _children[agentId].length;
        status = uint8(agent.status);
    }

    // ---------------------------------------------------------------- internals

    function _exists(uint256 agentId) private view returns (bool) {
        return agentId != 0 && agentId < nextAgentId;
    }

    /// @dev The checks of every agent-level write, in this order: a missing agent reports
    /// "Agent not found" rather than a misleading authorization error.
    function _requireAgentWrite(uint256 agentId) private view {
        require(_exists(agentId), "Agent not found");
        AgentRecord storage agent = _agents[agentId];
        require(_mayActFor(agent), "Not authorized for this agent");
        require(agent.status == AgentStatus.Active, "Agent not active");
    }

    /// @dev The checks of registering a child under `parentAgentId`, in `_requireAgentWrite`'s
    /// order (exists, authorized, Active), then the depth. Returns the child's generation and the
    /// Haftungsperson it inherits.
    function _placeChild(uint256 parentAgentId) private view returns (uint256 generation, address liablePerson) {
        require(_exists(parentAgentId), "Parent agent not found");
        AgentRecord storage parent = _agents[parentAgentId];
        require(_mayActFor(parent), "Not authorized for this agent");
        require(parent.status == AgentStatus.Active, "Parent agent not active");
        generation = parent.generation + 1;
        require(generation <= maxGenerationDepth, "Max generation depth exceeded");
        liablePerson = parent.haftungsperson;
    }

    /// @dev The caller is the agent's own wallet, its creator or its Haftungsperson.
    function _mayActFor(AgentRecord storage agent) private view returns (bool) {
        address caller = _msgSender();
        return caller == agent.agentWallet || caller == agent.creator || caller == agent.haftungsperson;
    }

    function _isCompliant(AgentRecord storage agent) private view returns (bool) {
        return agent.status == AgentStatus.Active && block.timestamp - agent.lastAttestation <= attestationGracePeriod;
    }
}

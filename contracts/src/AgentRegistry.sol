// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {ERC2771Context} from "@openzeppelin/contracts/metatx/ERC2771Context.sol";
import {EIP712} from "@openzeppelin/contracts/utils/cryptography/EIP712.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";

/// @title AgentRegistry
/// @notice On-chain registry of autonomous AI agents: identity, lineage, liability
/// (Haftungsperson), compliance attestations and revenue reports.
/// @dev ABI-compatible with the registry deployed on Base Sepolia (see INTERFACE.md section 1):
/// same signatures, struct field order and status enum. Every function reads the caller through
/// ERC-2771 `_msgSender()`, so requests relayed by the trusted forwarder act as their signer.
///
/// Consent (INTERFACE.md section 5): a wallet becomes an agent's `agentWallet`, and an address a
/// root's `haftungsperson`, only with its holder's consent: the caller is that party, or the
/// registration carries the party's EIP-712 signature in this contract's domain (published through
/// ERC-5267 `eip712Domain()`), checked with `SignatureChecker` so contract wallets consent through
/// ERC-1271. Each consent names the registering caller and uses up its signer's `consentNonce`.
contract AgentRegistry is ERC2771Context, EIP712 {
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

    bytes32 private constant AGENT_WALLET_CONSENT_TYPEHASH = keccak256(
        "AgentWalletConsent(address agentWallet,address creator,uint256 parentAgentId,uint256 nonce,uint256 deadline)"
    );
    bytes32 private constant LIABILITY_CONSENT_TYPEHASH = keccak256(
        "LiabilityConsent(address haftungsperson,address creator,address agentWallet,uint256 nonce,uint256 deadline)"
    );

    /// @notice Longest `operationalScope`, `currency` and `category`, in bytes: every string a
    /// registration or report stores is bounded, so no record can grow what reads it without limit.
    uint256 public constant MAX_OPERATIONAL_SCOPE_BYTES = 1024;
    uint256 public constant MAX_CURRENCY_BYTES = 16;
    uint256 public constant MAX_CATEGORY_BYTES = 64;
    /// @notice Furthest a consent's `deadline` may lie past the block it is used in. A consent is a
    /// bearer credential until its nonce moves; bounding its life bounds what a leaked one is worth.
    uint256 public constant MAX_CONSENT_LIFETIME = 7 days;

    address public owner;
    /// @notice Ids start at 1, so the number of agents ever registered is `nextAgentId - 1`.
    uint256 public nextAgentId = 1;
    uint256 public attestationGracePeriod = 7 days;
    uint256 public maxGenerationDepth = 10;

    mapping(address => bool) public isRegulator;
    /// @notice Agent id owning a wallet; 0 means none. A terminated agent frees its wallet; a revoked
    /// one keeps it, so the wallet can never be registered again (a regulator's sanction sticks).
    mapping(address => uint256) public walletToAgent;

    /// @notice The next nonce a consent signed by this address must name; a consent uses it up,
    /// `invalidateConsents` moves it by one (voiding the consents signed for it), and
    /// `invalidateConsentsThrough(n)` moves it to `n + 1` (voiding those signed for any nonce up to `n`).
    mapping(address => uint256) public consentNonce;

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
    /// @notice A consent signature was accepted and its nonce used up.
    event ConsentUsed(address indexed signer, uint256 nonce);
    /// @notice `signer` took back its consents: its consent nonce is now `nextNonce`, so every
    /// consent it signed for a lower nonce is void.
    event ConsentsInvalidated(address indexed signer, uint256 nextNonce);
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

    constructor(address trustedForwarder) ERC2771Context(trustedForwarder) EIP712("AgentRegistry", "1") {
        owner = msg.sender;
    }

    // ---------------------------------------------------------------- registration

    /// @notice Registers an agent whose caller is its own wallet and, for a root, its own
    /// Haftungsperson: `registerAgentWithConsent` with both consent signatures empty.
    function registerAgent(
        address haftungsperson,
        address agentWallet,
        bytes32 constitutionHash,
        bytes32 capabilityHash,
        string calldata operationalScope,
        uint256 parentAgentId,
        bool selfModifying
    ) external returns (uint256) {
        return _register(
            Registration(
                haftungsperson,
                agentWallet,
                constitutionHash,
                capabilityHash,
                operationalScope,
                parentAgentId,
                selfModifying
            ),
            0,
            "",
            ""
        );
    }

    /// @notice Registers an agent with its parties' consents. A child (parentAgentId != 0) needs
    /// an Active parent, sits one generation below it (at most `maxGenerationDepth`) and inherits
    /// its Haftungsperson, so only the parent's agent wallet, creator or Haftungsperson may
    /// register it. The agent wallet consents by being the caller or by `walletConsent`
    /// (`AgentWalletConsent`); a root's Haftungsperson by being the caller or by
    /// `liabilityConsent` (`LiabilityConsent`). An empty signature means "the caller is that
    /// party"; `deadline` covers both signatures. A child's `liabilityConsent` is not read.
    /// @dev Checks, in this order: the wallet is not zero; for a child, the parent exists
    /// ("Parent agent not found"), the caller may act for it ("Not authorized for this agent"),
    /// it is Active ("Parent agent not active") and the child stays within the depth ("Max
    /// generation depth exceeded"), as `_requireAgentWrite` orders its checks (a stranger learns
    /// nothing about a parent's status); the wallet is not bound to any agent, including a
    /// revoked one ("Wallet already registered to another agent"); the scope's length; then the
    /// wallet's consent and last the liability consent. When the wallet and a root's
    /// Haftungsperson are one signer, the liability consent names the nonce after the wallet's.
    function registerAgentWithConsent(
        address haftungsperson,
        address agentWallet,
        bytes32 constitutionHash,
        bytes32 capabilityHash,
        string memory operationalScope,
        uint256 parentAgentId,
        bool selfModifying,
        uint256 deadline,
        bytes memory walletConsent,
        bytes memory liabilityConsent
    ) external returns (uint256) {
        return _register(
            Registration(
                haftungsperson,
                agentWallet,
                constitutionHash,
                capabilityHash,
                operationalScope,
                parentAgentId,
                selfModifying
            ),
            deadline,
            walletConsent,
            liabilityConsent
        );
    }

    /// @dev A registration's arguments in one value, which keeps `_register` within the stack.
    struct Registration {
        address haftungsperson;
        address agentWallet;
        bytes32 constitutionHash;
        bytes32 capabilityHash;
        string operationalScope;
        uint256 parentAgentId;
        bool selfModifying;
    }

    function _register(
        Registration memory registration,
        uint256 deadline,
        bytes memory walletConsent,
        bytes memory liabilityConsent
    ) private returns (uint256) {
        address agentWallet = registration.agentWallet;
        require(agentWallet != address(0), "Agent wallet must not be zero");
        uint256 parentAgentId = registration.parentAgentId;
        uint256 generation = 0;
        address liablePerson = registration.haftungsperson;
        if (parentAgentId != 0) {
            (generation, liablePerson) = _placeChild(parentAgentId);
        }
        require(walletToAgent[agentWallet] == 0, "Wallet already registered to another agent");
        require(
            bytes(registration.operationalScope).length <= MAX_OPERATIONAL_SCOPE_BYTES, "Operational scope too long"
        );

        address creator = _msgSender();
        _requireWalletConsent(agentWallet, creator, parentAgentId, deadline, walletConsent);
        if (parentAgentId == 0) {
            _requireLiabilityConsent(liablePerson, creator, agentWallet, deadline, liabilityConsent);
        }

        uint256 agentId = nextAgentId++;
        uint64 now64 = uint64(block.timestamp);
        AgentRecord storage agent = _agents[agentId];
        agent.agentId = agentId;
        agent.creator = creator;
        agent.haftungsperson = liablePerson;
        agent.agentWallet = agentWallet;
        agent.constitutionHash = registration.constitutionHash;
        agent.capabilityHash = registration.capabilityHash;
        agent.operationalScope = registration.operationalScope;
        agent.parentAgentId = parentAgentId;
        agent.generation = generation;
        agent.selfModifying = registration.selfModifying;
        agent.registeredAt = now64;
        agent.lastAttestation = now64;
        agent.status = AgentStatus.Active;

        walletToAgent[agentWallet] = agentId;
        if (parentAgentId != 0) {
            _children[parentAgentId].push(agentId);
        }

        emit AgentRegistered(agentId, creator, agentWallet, liablePerson, parentAgentId, generation);
        return agentId;
    }

    /// @dev The agent wallet consents: it is the caller (an empty signature), or `signature` is
    /// its `AgentWalletConsent` to this creator and parent at its current nonce.
    function _requireWalletConsent(
        address agentWallet,
        address creator,
        uint256 parentAgentId,
        uint256 deadline,
        bytes memory signature
    ) private {
        if (_consentedByCaller(agentWallet, signature, "Agent wallet consent required")) return;
        bytes32 structHash = keccak256(
            abi.encode(
                AGENT_WALLET_CONSENT_TYPEHASH, agentWallet, creator, parentAgentId, consentNonce[agentWallet], deadline
            )
        );
        _useConsent(agentWallet, deadline, signature, structHash);
    }

    /// @dev A root's Haftungsperson consents: they are the caller (an empty signature), or
    /// `signature` is their `LiabilityConsent` to this creator and wallet at their current nonce.
    function _requireLiabilityConsent(
        address haftungsperson,
        address creator,
        address agentWallet,
        uint256 deadline,
        bytes memory signature
    ) private {
        if (_consentedByCaller(haftungsperson, signature, "Haftungsperson consent required")) return;
        bytes32 structHash = keccak256(
            abi.encode(
                LIABILITY_CONSENT_TYPEHASH, haftungsperson, creator, agentWallet, consentNonce[haftungsperson], deadline
            )
        );
        _useConsent(haftungsperson, deadline, signature, structHash);
    }

    /// @dev True when `party` consents by being the caller, which an empty signature claims;
    /// reverts with `missing` when it claims so and the caller is someone else. A signature given
    /// is always checked, even when the caller is the party.
    function _consentedByCaller(address party, bytes memory signature, string memory missing)
        private
        view
        returns (bool)
    {
        if (signature.length != 0) return false;
        require(_msgSender() == party, missing);
        return true;
    }

    /// @dev Checks `signer`'s consent over `structHash` (which names the signer's current nonce)
    /// and uses the nonce up.
    function _useConsent(address signer, uint256 deadline, bytes memory signature, bytes32 structHash) private {
        require(deadline >= block.timestamp, "Consent expired");
        require(deadline <= block.timestamp + MAX_CONSENT_LIFETIME, "Consent deadline too far");
        bytes32 digest = _hashTypedDataV4(structHash);
        require(SignatureChecker.isValidSignatureNow(signer, digest, signature), "Invalid consent signature");
        uint256 nonce = consentNonce[signer]++;
        emit ConsentUsed(signer, nonce);
    }

    // ---------------------------------------------------------------- consents

    /// @notice Takes back the consents the caller signed for its current consent nonce: moves the
    /// nonce by exactly one. A consent signed ahead, for the next nonce, is not voided: it becomes
    /// usable by this very call. To void those too, use `invalidateConsentsThrough`. Through the
    /// forwarder, the caller is the request's signer.
    function invalidateConsents() external {
        address signer = _msgSender();
        uint256 nextNonce = ++consentNonce[signer];
        emit ConsentsInvalidated(signer, nextNonce);
    }

    /// @notice Takes back every consent the caller signed for any nonce up to and including
    /// `nonce`, signed ahead or not: its consent nonce becomes `nonce + 1`. A `nonce` below the
    /// current one reverts, so the nonce never moves back and a used consent never becomes valid
    /// again. Through the forwarder, the caller is the request's signer.
    function invalidateConsentsThrough(uint256 nonce) external {
        address signer = _msgSender();
        require(nonce >= consentNonce[signer], "Consent nonce already past");
        uint256 nextNonce = nonce + 1;
        consentNonce[signer] = nextNonce;
        emit ConsentsInvalidated(signer, nextNonce);
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
        require(bytes(currency).length <= MAX_CURRENCY_BYTES, "Currency too long");
        require(bytes(category).length <= MAX_CATEGORY_BYTES, "Category too long");
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

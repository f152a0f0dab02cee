// Compiles contracts/src/*.sol (and the test contracts in contracts/test/) with the solc-js version pinned in package.json and writes one
// artifact per contract to contracts/artifacts/<Name>.json ({contractName, compiler, abi,
// bytecode, deployedBytecode}). Rust builds read those committed artifacts, so they need no Node.
// Multicall3.json pairs the ABI of contracts/interfaces/IMulticall3.sol with the creation code
// viem ships (`multicall3Bytecode`), which the local chain tool puts at Multicall3's address.
//
//   node contracts/compile.mjs           write the artifacts
//   node contracts/compile.mjs --check   exit 1 if the committed artifacts differ from the sources
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const require = createRequire(import.meta.url);
const solc = require("solc");

const contractsDir = path.dirname(fileURLToPath(import.meta.url));
const rootDir = path.dirname(contractsDir);
const srcDir = path.join(contractsDir, "src");
const artifactsDir = path.join(contractsDir, "artifacts");
const interfacesDir = path.join(contractsDir, "interfaces");
const testDir = path.join(contractsDir, "test");
// Each contract with the folder of its source: `src/` is deployed, `test/` only by tests.
const CONTRACTS = [
  ["src", "AgentRegistry"],
  ["src", "Forwarder"],
  ["test", "PolicyWallet"],
  ["test", "HostileRegistry"],
];
const ARTIFACTS = [...CONTRACTS.map(([, name]) => name), "Multicall3"];

// Source unit names are relative ("src/X.sol", "@openzeppelin/..."), never absolute paths, so
// the metadata hash inside the bytecode is the same on every machine.
const sources = {};
for (const file of fs.readdirSync(srcDir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[`src/${file}`] = { content: fs.readFileSync(path.join(srcDir, file), "utf8") };
}
for (const file of fs.readdirSync(testDir).filter((f) => f.endsWith(".sol")).sort()) {
  sources[`test/${file}`] = { content: fs.readFileSync(path.join(testDir, file), "utf8") };
}
sources["interfaces/IMulticall3.sol"] = { content: fs.readFileSync(path.join(interfacesDir, "IMulticall3.sol"), "utf8") };

const input = {
  language: "Solidity",
  sources,
  settings: {
    optimizer: { enabled: true, runs: 200 },
    evmVersion: "cancun",
    metadata: { bytecodeHash: "ipfs" },
    outputSelection: { "*": { "*": ["abi", "evm.bytecode.object", "evm.deployedBytecode.object"] } },
  },
};

function findImport(importPath) {
  const candidate = path.join(rootDir, "node_modules", importPath);
  if (fs.existsSync(candidate)) return { contents: fs.readFileSync(candidate, "utf8") };
  return { error: `import not found: ${importPath} (run the bootstrap to install npm packages)` };
}

const output = JSON.parse(solc.compile(JSON.stringify(input), { import: findImport }));
const errors = (output.errors ?? []).filter((e) => e.severity === "error");
for (const diagnostic of output.errors ?? []) console.error(diagnostic.formattedMessage);
if (errors.length > 0) process.exit(1);

const rendered = {};
for (const [dir, name] of CONTRACTS) {
  const contract = output.contracts[`${dir}/${name}.sol`]?.[name];
  if (!contract) {
    console.error(`contract ${name} missing from the compiler output`);
    process.exit(1);
  }
  const artifact = {
    contractName: name,
    compiler: `solc-js ${solc.version()}`,
    abi: contract.abi,
    bytecode: `0x${contract.evm.bytecode.object}`,
    deployedBytecode: `0x${contract.evm.deployedBytecode.object}`,
  };
  rendered[name] = JSON.stringify(artifact, null, 2) + "\n";
}

{
  // viem keeps the creation code among its constants (used for its deployless multicall), not in
  // its public exports; the file is part of the pinned package.
  const constants = path.join(rootDir, "node_modules/viem/_esm/constants/contracts.js");
  const { multicall3Bytecode } = await import(pathToFileURL(constants).href);
  if (!/^0x[0-9a-f]+$/.test(multicall3Bytecode ?? "")) {
    console.error(`no Multicall3 creation code in ${path.relative(rootDir, constants)}`);
    process.exit(1);
  }
  const viemVersion = JSON.parse(fs.readFileSync(path.join(rootDir, "node_modules/viem/package.json"), "utf8")).version;
  const artifact = {
    contractName: "Multicall3",
    compiler: `solc-js ${solc.version()} (ABI of interfaces/IMulticall3.sol)`,
    bytecodeSource: `viem ${viemVersion}, multicall3Bytecode`,
    abi: output.contracts["interfaces/IMulticall3.sol"].IMulticall3.abi,
    bytecode: multicall3Bytecode,
  };
  rendered.Multicall3 = JSON.stringify(artifact, null, 2) + "\n";
}

if (process.argv.includes("--check")) {
  const stale = ARTIFACTS.filter((name) => {
    const file = path.join(artifactsDir, `${name}.json`);
    return !fs.existsSync(file) || fs.readFileSync(file, "utf8") !== rendered[name];
  });
  if (stale.length > 0) {
    console.error(`contract artifacts out of date: ${stale.join(", ")}; run: node contracts/compile.mjs`);
    process.exit(1);
  }
  console.log(`contract artifacts match their sources (${ARTIFACTS.join(", ")})`);
} else {
  fs.mkdirSync(artifactsDir, { recursive: true });
  for (const name of ARTIFACTS) fs.writeFileSync(path.join(artifactsDir, `${name}.json`), rendered[name]);
  console.log(`wrote ${ARTIFACTS.map((n) => `contracts/artifacts/${n}.json`).join(", ")}`);
}

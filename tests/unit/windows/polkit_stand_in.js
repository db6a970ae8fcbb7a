// polkitd's rule evaluation, as far as opsbot's rules use it: each rule file is run in
// file-name order, each polkit.addRule() adds a function, and for a request the functions
// are asked in order until one returns an answer (NOT_HANDLED, or nothing, asks the next).
// The clock is the test's: Date.now() returns argv's NOW_MS.
//
//   node polkit_stand_in.js NOW_MS RULE_FILE... < queries.json
//   queries: [{"user": "...", "action": "...", "verb": "...", "unit": "..."}, ...]
//   prints: the answers as JSON, "yes", "no" or "not handled" each.
"use strict";
const fs = require("fs");
const vm = require("vm");

const [nowMs, ...files] = process.argv.slice(2);
const rules = [];
const polkit = {
  Result: { YES: "yes", NO: "no", NOT_HANDLED: null },
  addRule: (rule) => rules.push(rule),
  log: () => {},
};
const FixedDate = class extends Date {};
FixedDate.now = () => Number(nowMs);
const sandbox = vm.createContext({ polkit, Date: FixedDate });
for (const file of files.sort()) {
  vm.runInContext(fs.readFileSync(file, "utf8"), sandbox, { filename: file });
}
const queries = JSON.parse(fs.readFileSync(0, "utf8"));
const answers = queries.map((q) => {
  const action = { id: q.action, lookup: (key) => (key === "verb" ? q.verb : q.unit) };
  const subject = { user: q.user };
  for (const rule of rules) {
    const answer = rule(action, subject);
    if (answer !== null && answer !== undefined) return answer;
  }
  return "not handled";
});
process.stdout.write(JSON.stringify(answers));

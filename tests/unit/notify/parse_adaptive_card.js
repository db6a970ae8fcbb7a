// Parses the Adaptive Card on stdin with the npm package adaptivecards (Microsoft's own
// renderer library) and prints, as one JSON array, every event its parse and its
// validation report: an unknown element, a missing url, a bad value ... [] is a card it
// takes as written. Usage: node parse_adaptive_card.js <path of dist/adaptivecards.js>
"use strict";
const AdaptiveCards = require(process.argv[2]);

const input = require("fs").readFileSync(0, "utf8");
const context = new AdaptiveCards.SerializationContext();
const card = new AdaptiveCards.AdaptiveCard();
card.parse(JSON.parse(input), context);
const events = [];
for (let i = 0; i < context.eventCount; i++) {
    events.push(context.getEventAt(i));
}
events.push(...card.validateProperties().validationEvents);
const described = events.map((e) => `${AdaptiveCards.ValidationEvent[e.event]}: ${e.message}`);
process.stdout.write(JSON.stringify(described) + "\n");

// Google's GenAI SDK for node (@google/genai) against a Switchboard at
// process.env.BASE (tests/integration/test_gemini_client.py runs it with
// the Node 22 beside it): a streamed answer and a function call, printed as
// one JSON object for the test to check.
import { GoogleGenAI } from "@google/genai";

const ai = new GoogleGenAI({ apiKey: process.env.KEY || "unused", httpOptions: { baseUrl: process.env.BASE } });

let text = "";
let last;
for await (const chunk of await ai.models.generateContentStream({ model: "echo", contents: "one two three" })) {
  text += chunk.text ?? "";
  last = chunk;
}

const writeFile = {
  name: "write_file",
  description: "Write a file",
  parametersJsonSchema: {
    type: "object",
    properties: { file_path: { type: "string" }, content: { type: "string" } },
    required: ["file_path", "content"],
  },
};
const called = await ai.models.generateContent({
  model: "models/echo",
  contents: process.env.CALL,
  config: { tools: [{ functionDeclarations: [writeFile] }] },
});

console.log(JSON.stringify({
  text,
  finish: last.candidates[0].finishReason,
  usage: last.usageMetadata,
  calls: called.functionCalls.map(({ name, args }) => ({ name, args })),
}));

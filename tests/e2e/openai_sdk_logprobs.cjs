// Run by test_openai_sdk: the official OpenAI JS SDK reads logprobs from a kvscope-cli serve.
// argv: BASE_URL. Prints one JSON object with what the SDK parsed; exits 1 on any SDK error.
const OpenAI = require('openai');

async function main() {
  const client = new OpenAI({ baseURL: process.argv[2], apiKey: 'unused' });
  const completion = await client.completions.create({
    model: 'stories260K-hf', prompt: 'Once upon a time', max_tokens: 6, temperature: 0, logprobs: 3,
  });
  const chat = await client.chat.completions.create({
    model: 'stories260K-hf', messages: [{ role: 'user', content: 'Who is Lily?' }], max_tokens: 6,
    temperature: 0, logprobs: true, top_logprobs: 2,
  });
  const stream = await client.chat.completions.create({
    model: 'stories260K-hf', messages: [{ role: 'user', content: 'Who is Lily?' }], max_tokens: 6,
    temperature: 0, logprobs: true, top_logprobs: 2, stream: true,
  });
  const streamed = [];
  for await (const chunk of stream)
    for (const c of chunk.choices) if (c.logprobs) streamed.push(...c.logprobs.content);
  console.log(JSON.stringify({
    completion: completion.choices[0].logprobs,
    completion_text: completion.choices[0].text,
    chat: chat.choices[0].logprobs.content,
    chat_text: chat.choices[0].message.content,
    streamed,
  }));
}

main().catch((e) => { console.error(String(e)); process.exit(1); });

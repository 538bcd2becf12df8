// ChatTemplate: family detection from real-looking Jinja sources (and model hints when there is
// none), the exact text each family renders (hand-written expectations), and the BOS contract
// with encode on the real stories260K tokenizer.
#include "model/chat_template.h"
#include "model/tokenizer.h"
#include "test_support.h"
#include "util/errors.h"
#include "util/local_time.h"

#include <QtTest>
#include <QTemporaryDir>

#include <nlohmann/json.hpp>

#include <fstream>

using kvscope::ChatMessage;
using kvscope::ChatTemplate;

namespace {

const char* kLlama3Source =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
    "message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
const char* kQwen2Source =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou "
    "are a helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
    "}}{% endif %}";
const char* kSmolLmSource =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + "
    "message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}";
const char* kChatMlSource =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
const char* kLlama2Source =
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = "
    "messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}"
    "{% for message in loop_messages %}{% if loop.index0 == 0 and system_message != false %}{% set content = "
    "'<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = "
    "message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' "
    "[/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}"
    "{% endfor %}";
const char* kMistralSource =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
    "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
    "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
    "'assistant' %}{{ message['content'] + eos_token}}{% endif %}{% endfor %}";
const char* kZephyrSource =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + "
    "eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% "
    "elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n"
    "{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";
const char* kGemmaSource =
    "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + message['role'] + '\n' + message['content'] | "
    "trim + '<end_of_turn>\n' }}{% endfor %}";

// google/gemma-3-1b-it's tokenizer_config.json template (its text-only branch; the 4b+ models' adds image
// parts).
const char* kGemma3Source =
    "{{ bos_token }}\n{%- if messages[0]['role'] == 'system' -%}\n    {%- if messages[0]['content'] is string -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}\n    {%- else -%}\n"
    "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\n\n' -%}\n    {%- endif -%}\n"
    "    {%- set loop_messages = messages[1:] -%}\n{%- else -%}\n    {%- set first_user_prefix = \"\" -%}\n"
    "    {%- set loop_messages = messages -%}\n{%- endif -%}\n{%- for message in loop_messages -%}\n"
    "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
    "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") }}\n"
    "    {%- endif -%}\n    {%- if (message['role'] == 'assistant') -%}\n        {%- set role = \"model\" -%}\n"
    "    {%- else -%}\n        {%- set role = message['role'] -%}\n    {%- endif -%}\n"
    "    {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else \"\") }}\n"
    "    {%- if message['content'] is string -%}\n        {{ message['content'] | trim }}\n"
    "    {%- endif -%}\n    {{ '<end_of_turn>\n' }}\n{%- endfor -%}\n{%- if add_generation_prompt -%}\n"
    "    {{'<start_of_turn>model\n'}}\n{%- endif -%}\n";

// Abridged from the published templates, keeping the markers and the structure each family is known by.
const char* kQwen3Source =
    "{%- for message in messages %}{%- if message.role == \"user\" or (message.role == \"system\") %}{{- '<|im_start|>' + "
    "message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- elif message.role == \"assistant\" %}{%- set "
    "content = message.content %}{%- if '</think>' in message.content %}{%- set content = "
    "message.content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + "
    "content }}{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- "
    "'<think>\\n\\n</think>\\n\\n' }}{%- endif %}{%- endif %}";
const char* kPhi3Source =
    "{% for message in messages %}{% if message['role'] == 'system' and message['content'] %}{{'<|system|>\n' + "
    "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' + message['content'] + "
    "'<|end|>\n'}}{% elif message['role'] == 'assistant' %}{{'<|assistant|>\n' + message['content'] + "
    "'<|end|>\n'}}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token "
    "}}{% endif %}";
// Abridged from meta-llama/Llama-3.1-8B-Instruct (no tools): every chat opens with a dated system turn.
const char* kLlama31Source =
    "{{- bos_token }}{%- if not date_string is defined %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}"
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content']|trim %}{%- set messages = "
    "messages[1:] %}{%- else %}{%- set system_message = \"\" %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}{{- system_message }}"
    "{{- \"<|eot_id|>\" }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ "
    "message['content'] | trim + '<|eot_id|>' }}{%- endfor %}{%- if add_generation_prompt %}{{- "
    "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}";
// Llama 3.2's date line: today, where the renderer has strftime_now (HF transformers, vLLM).
const char* kLlama32DateSource =
    "{%- if not date_string is defined %}{%- if strftime_now is defined %}{%- set date_string = strftime_now(\"%d %b %Y\") %}"
    "{%- else %}{%- set date_string = \"26 Jul 2024\" %}{%- endif %}{%- endif %}{{- \"<|start_header_id|>system<|end_header_id|>\\n\\n\" }}"
    "{{- \"Cutting Knowledge Date: December 2023\\n\" }}{{- \"Today Date: \" + date_string + \"\\n\\n\" }}";
// Qwen2.5: its tools branch opens the same system head with an expression before the literal default.
const char* kQwen25Source =
    "{%- if tools %}{{- '<|im_start|>system\\n' }}{%- if messages[0]['role'] == 'system' %}{{- messages[0]['content'] }}"
    "{%- else %}{{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}{%- endif %}{%- else %}"
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
    "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
// Abridged from mistralai/Mistral-Nemo-Instruct-2407 (v3-tekken): no spaces inside [INST], the system prompt on
// the last user turn.
const char* kNemoSource =
    "{%- if messages[0][\"role\"] == \"system\" %}{%- set system_message = messages[0][\"content\"] %}{%- set loop_messages = "
    "messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}{{- bos_token }}{%- for message in loop_messages %}"
    "{%- if message[\"role\"] == \"user\" %}{%- if loop.last and system_message is defined %}{{- \"[INST]\" + system_message + "
    "\"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}{%- else %}{{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}{%- endif %}"
    "{%- elif message[\"role\"] == \"assistant\" %}{{- message[\"content\"] + eos_token}}{%- endif %}{%- endfor %}";
// Abridged from deepseek-ai/DeepSeek-V3 and DeepSeek-R1 (no tools).
const char* kDeepSeekV3Source =
    "{% set ns = namespace(system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{% set "
    "ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in "
    "messages %}{%- if message['role'] == 'user' %}{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + message['content']}}{%- endif %}{%- if "
    "message['role'] == 'assistant' %}{{'<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>' + message['content'] + '<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>'}}"
    "{%- endif %}{%- endfor %}{% if add_generation_prompt %}{{'<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>'}}{% endif %}";
const char* kDeepSeekR1Source =
    "{{ bos_token }}{%- for message in messages %}{%- if message['role'] == 'user' %}{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + "
    "message['content']}}{%- endif %}{%- if message['role'] == 'assistant' %}{% set content = message['content'] %}{% if "
    "'</think>' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>' + "
    "content + '<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>'}}{%- endif %}{%- endfor %}{% if add_generation_prompt %}"
    "{{'<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C><think>\\n'}}{% endif %}";
// microsoft/phi-4's template: ChatML-like with <|im_sep|>.
const char* kPhi4Source =
    "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + "
    "'<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|>'}}{% "
    "elif (message['role'] == 'assistant') %}{{'<|im_start|>assistant<|im_sep|>' + message['content'] + '<|im_end|>'}}{% endif "
    "%}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant<|im_sep|>' }}{% endif %}";
// Abridged from the templates of Mistral Small 3.2 and Mistral Large 2411 (v7), gpt-oss, IBM Granite 3.3 and 4.0,
// Gemma 4, Qwen3.5 and SmolLM3: each keeps its family's markers, default system prompt and turn layout.
const char* kMistralSmall3Source =
    "{%- set today = strftime_now(\"%Y-%m-%d\") %}{%- set default_system_message = \"You are Mistral Small 3, a Lar"
    "ge Language Model (LLM) created by Mistral AI.\\nThe current date is \" + today + \".\" %}{{- bos_token }}{%- "
    "set system_prompt = default_system_message %}{%- set loop_messages = messages %}{%- if messages|length > 0 and"
    " messages[0]['role'] == 'system' %}{%- set system_prompt = messages[0]['content'] %}{%- set loop_messages = me"
    "ssages[1:] %}{%- endif %}{{- '[SYSTEM_PROMPT]' + system_prompt + '[/SYSTEM_PROMPT]' }}{%- for message in loop_"
    "messages %}{%- if message['role'] == 'system' %}{{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]"
    "' }}{%- elif message['role'] == 'user' %}{{- '[INST]' + message['content'] + '[/INST]' }}{%- elif message['rol"
    "e'] == 'assistant' %}{{- message['content'] + eos_token }}{%- endif %}{%- endfor %}";
const char* kMistralLargeV7Source =
    "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'"
    "] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_P"
    "ROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% endif %}{% end"
    "for %}";
const char* kGptOssSource =
    "{{- \"<|start|>system<|message|>\" }}{{- \"You are ChatGPT, a large language model trained by OpenAI.\\n\" }}{"
    "{- \"Knowledge cutoff: 2024-06\\n\" }}{{- \"Current date: \" + strftime_now(\"%Y-%m-%d\") + \"\\n\\n\" }}{{- "
    "\"Reasoning: medium\\n\\n\" }}{{- \"# Valid channels: analysis, commentary, final. Channel must be included for"
    " every message.\" }}{{- \"<|end|>\" }}{%- if messages[0].role == \"developer\" or messages[0].role == \"system"
    "\" %}{%- set developer_message = messages[0].content %}{%- set loop_messages = messages[1:] %}{%- else %}{%- s"
    "et developer_message = \"\" %}{%- set loop_messages = messages %}{%- endif %}{%- if developer_message %}{{- \""
    "<|start|>developer<|message|># Instructions\\n\\n\" + developer_message + \"\\n\\n<|end|>\" }}{%- endif %}{%- "
    "for message in loop_messages -%}{%- if message.role == 'assistant' -%}{%- if loop.last and not add_generation_"
    "prompt %}{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|return|>\" }}{%- else %"
    "}{{- \"<|start|>assistant<|channel|>final<|message|>\" + message.content + \"<|end|>\" }}{%- endif %}{%- elif "
    "message.role == 'user' -%}{{- \"<|start|>user<|message|>\" + message.content + \"<|end|>\" }}{%- endif -%}{%- "
    "endfor -%}{%- if add_generation_prompt -%}<|start|>assistant{%- endif -%}";
const char* kGranite3Source =
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}{%- set loop_messag"
    "es = messages[1:] %}{%- else %}{%- set system_message = \"Knowledge Cutoff Date: April 2024. Today's Date: \" "
    "+ strftime_now('%B %d, %Y') + \". You are Granite, developed by IBM.\" %}{%- if available_tools %}{%- set syst"
    "em_message = system_message + \" You are a helpful assistant with access to the following tools.\" %}{%- elif "
    "thinking %}{%- set system_message = system_message + \" You are a helpful AI assistant.\\nRespond to every use"
    "r query in a comprehensive and detailed way.\" %}{%- else %}{%- set system_message = system_message + \" You a"
    "re a helpful AI assistant.\" %}{%- endif %}{%- set loop_messages = messages %}{%- endif %}{{- '<|start_of_role"
    "|>system<|end_of_role|>' + system_message + '<|end_of_text|>\\n' }}{%- for message in loop_messages %}{{- '<|s"
    "tart_of_role|>' + message['role'] + '<|end_of_role|>' + message['content'] + '<|end_of_text|>\\n' }}{%- if loo"
    "p.last and add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}{%- endfor %}";
const char* kGranite4Source =
    "{%- set g4_default_system_message = 'You are a helpful assistant. Please ensure responses are professional, ac"
    "curate, and safe.' %}{%- if messages[0].role == 'system' %}{%- set system_message = messages[0].content %}{%- "
    "set loop_messages = messages[1:] %}{%- else %}{%- set system_message = g4_default_system_message %}{%- set loo"
    "p_messages = messages %}{%- endif %}{{- '<|start_of_role|>system<|end_of_role|>' + system_message + '<|end_of_"
    "text|>\\n' }}{%- for message in loop_messages %}{{- '<|start_of_role|>' + message.role + '<|end_of_role|>' + m"
    "essage.content + '<|end_of_text|>\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|start_of_role|>assi"
    "stant<|end_of_role|>' }}{%- endif %}";
const char* kGemma4Source =
    "{{- bos_token -}}{%- for message in messages -%}{%- set role = 'model' if message['role'] == 'assistant' else "
    "message['role'] -%}{{- '<|turn>' + role + '\\n' + message['content'] | trim + '<turn|>\\n' -}}{%- endfor -%}{%"
    "- if add_generation_prompt -%}{{- '<|turn>model\\n' -}}{%- if not enable_thinking | default(false) -%}{{- '<|c"
    "hannel>thought\\n<channel|>' -}}{%- endif -%}{%- endif -%}";
const char* kQwen35Source =
    "{%- for message in messages %}{%- set content = message.content|trim %}{%- if message.role == \"assistant\" an"
    "d '</think>' in content %}{%- set content = content.split('</think>')[-1].lstrip('\\n') %}{%- endif %}{{- '<|i"
    "m_start|>' + message.role + '\\n' + content|trim + '<|im_end|>\\n' }}{%- endfor %}{%- if add_generation_prompt"
    " %}{{- '<|im_start|>assistant\\n' }}{%- if enable_thinking is defined and enable_thinking is false %}{{- '<thi"
    "nk>\\n\\n</think>\\n\\n' }}{%- else %}{{- '<think>\\n' }}{%- endif %}{%- endif %}";
const char* kSmolLm3Source =
    "{{- \"<|im_start|>system\\n\" -}}{{- \"## Metadata\\n\\n\" -}}{{- \"Knowledge Cutoff Date: June 2025\\n\" -}}{"
    "{- \"Reasoning Mode: /think\\n\\n\" -}}{{- \"## Custom Instructions\\n\\n\" -}}{%- for message in messages -%}"
    "{{- \"<|im_start|>\" + message.role + \"\\n\" + message.content + \"<|im_end|>\\n\" -}}{%- endfor -%}{%- if ad"
    "d_generation_prompt -%}{{- \"<|im_start|>assistant\\n<think>\\n\" -}}{%- endif -%}";
// Llama 4's turns as Meta's prompt format documents them.
const char* kLlama4Source =
    "{{- bos_token }}{%- for message in messages %}{{- '<|header_start|>' + message['role'] + '<|header_end|>\\n\\n' }}"
    "{{- message['content'] | trim }}{{- '<|eot|>' }}{%- endfor %}{%- if add_generation_prompt %}"
    "{{- '<|header_start|>assistant<|header_end|>\\n\\n' }}{%- endif %}";
// microsoft/Phi-4-mini-instruct's template.
const char* kPhi4MiniSource =
    "{% for message in messages %}{% if message['role'] == 'system' and 'tools' in message and message['tools'] is not none %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|tool|>' + message['tools'] + '<|/tool|>' + '<|end|>' }}{% else %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|assistant|>' }}{% else %}{{ eos_token }}{% endif %}";
// Variants that a differential check against Jinja2 (set up as HF transformers does) on the published
// templates turned up, abridged: Llama 3's first template (a generation prompt always), Qwen3's reasoning
// after the last user turn, QwQ's last answer kept whole, DeepSeek-R1's first template, DeepSeek V3.1
// without thinking, Granite 4's default for an empty system message.
const char* kLlama3FirstSource =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + m"
    "essage['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
    "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<"
    "|end_header_id|>\\n\\n' }}";
const char* kQwen3LastQuerySource =
    "{%- set ns = namespace(multi_step_tool=true, last_query_index=messages|length - 1) %}{%- for message in messag"
    "es[::-1] %}{%- set index = (messages|length - 1) - loop.index0 %}{%- if ns.multi_step_tool and message.role =="
    " \"user\" %}{%- set ns.multi_step_tool = false %}{%- set ns.last_query_index = index %}{%- endif %}{%- endfor "
    "%}{%- for message in messages %}{%- if message.role == \"user\" or message.role == \"system\" %}{{- '<|im_star"
    "t|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- elif message.role == \"assistant\" "
    "%}{%- set content = message.content %}{%- set reasoning_content = '' %}{%- if '</think>' in message.content %}"
    "{%- set content = message.content.split('</think>')[-1].lstrip('\\n') %}{%- set reasoning_content = message.co"
    "ntent.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}{%- endif %}{%- if loop.index0 >"
    " ns.last_query_index %}{%- if loop.last or (not loop.last and reasoning_content) %}{{- '<|im_start|>' + messag"
    "e.role + '\\n<think>\\n' + reasoning_content.strip('\\n') + '\\n</think>\\n\\n' + content.lstrip('\\n') }}{%- "
    "else %}{{- '<|im_start|>' + message.role + '\\n' + content }}{%- endif %}{%- else %}{{- '<|im_start|>' + messa"
    "ge.role + '\\n' + content }}{%- endif %}{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}{%- if add_generation_p"
    "rompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}";
const char* kQwQSource =
    "{%- for message in messages %}{%- if (message.role == \"user\") or (message.role == \"system\") %}{{- '<|im_st"
    "art|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- elif message.role == \"assistant"
    "\" %}{%- set content = message.content %}{%- if not loop.last %}{%- set content = message.content.split('</thi"
    "nk>')[-1].lstrip('\\n') %}{%- endif %}{{- '<|im_start|>' + message.role + '\\n' + content + '<|im_end|>' + '\\"
    "n' }}{%- endif %}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n<think>\\n' }}{%- en"
    "dif %}";
const char* kDeepSeekR1FirstSource =
    "{% set ns = namespace(system_prompt='') %}{%- for message in messages %}{%- if message['role'] == 'system' %}{"
    "% set ns.system_prompt = message['content'] %}{%- endif %}{%- endfor %}{{bos_token}}{{ns.system_prompt}}{%- fo"
    "r message in messages %}{%- if message['role'] == 'user' %}{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + message['conte"
    "nt']}}{%- endif %}{%- if message['role'] == 'assistant' %}{% set content = message['content'] %}{% if '</think"
    ">' in content %}{% set content = content.split('</think>')[-1] %}{% endif %}{{'<\xEF\xBD\x9C" "Assistant"
    "\xEF\xBD\x9C>' + content + '<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>'}}{%- endif %}{"
    "%- endfor -%}{% if add_generation_prompt %}{{'<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>'}}{% endif %}";
const char* kDeepSeekV31Source =
    "{% if not thinking is defined %}{% set thinking = false %}{% endif %}{% set ns = namespace(system_prompt='', i"
    "s_first_sp=true, is_last_user=false) %}{%- for message in messages %}{%- if message['role'] == 'system' %}{%- "
    "if ns.is_first_sp %}{% set ns.system_prompt = ns.system_prompt + message['content'] %}{% set ns.is_first_sp = "
    "false %}{%- else %}{% set ns.system_prompt = ns.system_prompt + '\\n\\n' + message['content'] %}{%- endif %}{%"
    "- endif %}{%- endfor %}{{ bos_token }}{{ ns.system_prompt }}{%- for message in messages %}{%- if message['role"
    "'] == 'user' %}{%- set ns.is_last_user = true -%}{{'<\xEF\xBD\x9CUser\xEF\xBD\x9C>' + message['content']}}{%- "
    "endif %}{%- if message['role'] == 'assistant' %}{%- if ns.is_last_user %}{{'<\xEF\xBD\x9C" "Assistant"
    "\xEF\xBD\x9C>'}}{%- if message['prefix'] is defined and message['prefix'] and thinking %}{{'<think>'}}{%- else"
    " %}{{'</think>'}}{%- endif %}{%- endif %}{%- set ns.is_last_user = false -%}{%- set content = message['content"
    "'] -%}{%- if '</think>' in content %}{%- set content = content.split('</think>', 1)[1] -%}{%- endif %}{{conten"
    "t + '<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>'}}{%- endif %}{%- endfor -%}{%- if add"
    "_generation_prompt and ns.is_last_user %}{{'<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>'}}{%- if not thinking %}{{'"
    "</think>'}}{%- else %}{{'<think>'}}{%- endif %}{% endif %}";
const char* kGranite4EmptySystemSource =
    "{%- set g4_default_system_message = 'You are a helpful assistant. Please ensure responses are professional, ac"
    "curate, and safe.' %}{%- set ns = namespace(default_system_message=g4_default_system_message, system_message='"
    "') %}{%- if messages[0].role == 'system' %}{%- set ns.system_message = messages[0].content %}{%- endif %}{%- i"
    "f ns.system_message %}{{- '<|start_of_role|>system<|end_of_role|>' + ns.system_message + '<|end_of_text|>\\n' "
    "}}{%- else %}{{- '<|start_of_role|>system<|end_of_role|>' + ns.default_system_message + '<|end_of_text|>\\n' }"
    "}{%- endif %}{%- for message in messages %}{%- if message.role != 'system' or not loop.first %}{{- '<|start_of"
    "_role|>' + message.role + '<|end_of_role|>' + message.content + '<|end_of_text|>\\n' }}{%- endif %}{%- endfor "
    "%}{%- if add_generation_prompt %}{{- '<|start_of_role|>assistant<|end_of_role|>' }}{%- endif %}";
const char* kUnknownSource = "{% for message in messages %}### {{ message['role'] }}: {{ message['content'] }}\n{% endfor %}";

const std::vector<ChatMessage> kSystemUser = {{"system", "You are helpful."}, {"user", "Hi!"}};
const std::vector<ChatMessage> kUser = {{"user", "Hi!"}};
// A Qwen3 conversation whose first answer kept its reasoning: the template drops it.
const std::vector<ChatMessage> kThinkingTurns = {{"user", "Hi!"}, {"assistant", "<think>\nThe user greets.\n</think>\n\nHello."}, {"user", "Bye"}};
const std::vector<ChatMessage> kTurns = {{"system", "You are helpful."}, {"user", "Hi!"}, {"assistant", "Hello."}, {"user", "Bye"}};
// Chats that end with the answer (a continuation or a scored transcript), with reasoning and without.
const std::vector<ChatMessage> kAnsweredThinking = {{"user", "Hi!"}, {"assistant", "<think>\nThe user greets.\n</think>\n\nHello."}};
const std::vector<ChatMessage> kAnswered = {{"user", "Hi!"}, {"assistant", "Hello."}};
const std::vector<ChatMessage> kEmptySystem = {{"system", ""}, {"user", "Hi!"}};

}  // namespace

class TestChatTemplate : public QObject {
    Q_OBJECT

private slots:
    void detect_data() {
        QTest::addColumn<QByteArray>("source");
        QTest::addColumn<QByteArray>("hint");
        QTest::addColumn<QString>("family");
        QTest::newRow("llama3") << QByteArray(kLlama3Source) << QByteArray() << "llama3";
        QTest::newRow("qwen2") << QByteArray(kQwen2Source) << QByteArray() << "chatml";
        QTest::newRow("smollm") << QByteArray(kSmolLmSource) << QByteArray() << "chatml";
        QTest::newRow("chatml") << QByteArray(kChatMlSource) << QByteArray() << "chatml";
        QTest::newRow("llama2") << QByteArray(kLlama2Source) << QByteArray() << "llama2";
        QTest::newRow("mistral") << QByteArray(kMistralSource) << QByteArray() << "mistral";
        QTest::newRow("zephyr") << QByteArray(kZephyrSource) << QByteArray() << "zephyr";
        QTest::newRow("gemma") << QByteArray(kGemmaSource) << QByteArray() << "gemma";
        QTest::newRow("qwen3") << QByteArray(kQwen3Source) << QByteArray() << "qwen3";
        QTest::newRow("phi3") << QByteArray(kPhi3Source) << QByteArray() << "phi3";
        QTest::newRow("llama3.1") << QByteArray(kLlama31Source) << QByteArray() << "llama3";
        QTest::newRow("qwen2.5") << QByteArray(kQwen25Source) << QByteArray() << "chatml";
        QTest::newRow("mistral nemo") << QByteArray(kNemoSource) << QByteArray() << "mistral";
        QTest::newRow("deepseek v3") << QByteArray(kDeepSeekV3Source) << QByteArray() << "deepseek";
        QTest::newRow("phi4") << QByteArray(kPhi4Source) << QByteArray() << "phi4";
        QTest::newRow("hint phi4") << QByteArray() << QByteArray("phi-4") << "phi4";
        QTest::newRow("hint phi4 mini") << QByteArray() << QByteArray("Phi-4-mini-instruct") << "phi4-mini";
        QTest::newRow("phi4 mini") << QByteArray(kPhi4MiniSource) << QByteArray() << "phi4-mini";
        QTest::newRow("deepseek r1") << QByteArray(kDeepSeekR1Source) << QByteArray() << "deepseek";
        QTest::newRow("unknown template") << QByteArray(kUnknownSource) << QByteArray("qwen2") << "plain";
        QTest::newRow("mistral small 3") << QByteArray(kMistralSmall3Source) << QByteArray() << "mistral-v7";
        QTest::newRow("mistral large 2411") << QByteArray(kMistralLargeV7Source) << QByteArray() << "mistral-v7";
        QTest::newRow("gpt-oss") << QByteArray(kGptOssSource) << QByteArray() << "gpt-oss";
        QTest::newRow("llama4") << QByteArray(kLlama4Source) << QByteArray() << "llama4";
        QTest::newRow("granite 3") << QByteArray(kGranite3Source) << QByteArray() << "granite";
        QTest::newRow("granite 4") << QByteArray(kGranite4Source) << QByteArray() << "granite";
        QTest::newRow("gemma 4") << QByteArray(kGemma4Source) << QByteArray() << "gemma4";
        QTest::newRow("qwen3.5") << QByteArray(kQwen35Source) << QByteArray() << "qwen3";
        QTest::newRow("smollm3") << QByteArray(kSmolLm3Source) << QByteArray("SmolLM3-3B") << "plain";
        QTest::newRow("hint gemma") << QByteArray() << QByteArray("Gemma3ForCausalLM") << "gemma";
        QTest::newRow("hint qwen3") << QByteArray() << QByteArray("Qwen3ForCausalLM") << "qwen3";
        QTest::newRow("hint phi3") << QByteArray() << QByteArray("Phi-3.5-mini-instruct") << "phi3";
        QTest::newRow("no template") << QByteArray() << QByteArray() << "plain";
        QTest::newRow("hint qwen") << QByteArray() << QByteArray("Qwen2ForCausalLM") << "chatml";
        QTest::newRow("hint tinyllama") << QByteArray() << QByteArray("TinyLlama-1.1B-Chat-v1.0") << "zephyr";
        QTest::newRow("hint llama3") << QByteArray() << QByteArray("Meta-Llama-3-8B-Instruct") << "llama3";
        QTest::newRow("hint stories") << QByteArray() << QByteArray("stories260K") << "plain";
    }

    void detect() {
        QFETCH(QByteArray, source);
        QFETCH(QByteArray, hint);
        QFETCH(QString, family);
        const ChatTemplate t = ChatTemplate::detect(source.toStdString(), hint.toStdString());
        QCOMPARE(QString::fromStdString(t.family()), family);
        // Only a template the model carries and kvscope does not render is flagged.
        QCOMPARE(t.unrecognized(), family == "plain" && !source.isEmpty());
    }

    void render_data() {
        QTest::addColumn<QByteArray>("source");
        // 0 system+user, 1 user, 2 turns, 3 turns with reasoning, 4 / 5 ending with an answer with / without
        // reasoning, 6 an empty system message
        QTest::addColumn<int>("conversation");
        QTest::addColumn<bool>("generation_prompt");
        QTest::addColumn<QByteArray>("expected");
        QTest::newRow("llama3") << QByteArray(kLlama3Source) << 0 << true
                                << QByteArray("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are "
                                              "helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                                              "<|start_header_id|>assistant<|end_header_id|>\n\n");
        QTest::newRow("llama3 no prompt") << QByteArray(kLlama3Source) << 1 << false
                                          << QByteArray("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
        QTest::newRow("chatml") << QByteArray(kChatMlSource) << 0 << true
                                << QByteArray("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
                                              "<|im_start|>assistant\n");
        QTest::newRow("qwen2 default system") << QByteArray(kQwen2Source) << 1 << true
                                              << QByteArray("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                                                            "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
        QTest::newRow("qwen2 own system") << QByteArray(kQwen2Source) << 0 << false
                                          << QByteArray("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n");
        QTest::newRow("smollm default system")
            << QByteArray(kSmolLmSource) << 1 << true
            << QByteArray("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                          "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
        QTest::newRow("llama2") << QByteArray(kLlama2Source) << 2 << true
                                << QByteArray("<s>[INST] <<SYS>>\nYou are helpful.\n<</SYS>>\n\nHi! [/INST] Hello. </s>"
                                              "<s>[INST] Bye [/INST]");
        QTest::newRow("llama2 user") << QByteArray(kLlama2Source) << 1 << true << QByteArray("<s>[INST] Hi! [/INST]");
        QTest::newRow("mistral") << QByteArray(kMistralSource) << 2 << true
                                 << QByteArray("<s>[INST] You are helpful.\n\nHi! [/INST]Hello.</s>[INST] Bye [/INST]");
        QTest::newRow("zephyr") << QByteArray(kZephyrSource) << 0 << true
                                << QByteArray("<|system|>\nYou are helpful.</s>\n<|user|>\nHi!</s>\n<|assistant|>\n");
        QTest::newRow("zephyr turns") << QByteArray(kZephyrSource) << 2 << false
                                      << QByteArray("<|system|>\nYou are helpful.</s>\n<|user|>\nHi!</s>\n<|assistant|>\n"
                                                    "Hello.</s>\n<|user|>\nBye</s>\n");
        QTest::newRow("qwen3") << QByteArray(kQwen3Source) << 0 << true
                               << QByteArray("<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi!<|im_end|>\n"
                                             "<|im_start|>assistant\n");
        QTest::newRow("qwen3 turns") << QByteArray(kQwen3Source) << 3 << true
                                     << QByteArray("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n"
                                                   "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n");
        QTest::newRow("gemma") << QByteArray(kGemmaSource) << 0 << true
                               << QByteArray("<bos><start_of_turn>user\nYou are helpful.\n\nHi!<end_of_turn>\n"
                                             "<start_of_turn>model\n");
        QTest::newRow("gemma turns") << QByteArray(kGemmaSource) << 2 << false
                                     << QByteArray("<bos><start_of_turn>user\nYou are helpful.\n\nHi!<end_of_turn>\n"
                                                   "<start_of_turn>model\nHello.<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n");
        QTest::newRow("phi3") << QByteArray(kPhi3Source) << 2 << true
                              << QByteArray("<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\n"
                                            "Hello.<|end|>\n<|user|>\nBye<|end|>\n<|assistant|>\n");
        QTest::newRow("llama3.1 dated system")
            << QByteArray(kLlama31Source) << 0 << true
            << QByteArray("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                          "Today Date: 26 Jul 2024\n\nYou are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!"
                          "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        QTest::newRow("llama3.1 no system")
            << QByteArray(kLlama31Source) << 1 << false
            << QByteArray("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: December 2023\n"
                          "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
        QTest::newRow("qwen2.5 default system")
            << QByteArray(kQwen25Source) << 1 << true
            << QByteArray("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
                          "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
        QTest::newRow("mistral nemo") << QByteArray(kNemoSource) << 2 << true
                                      << QByteArray("<s>[INST]Hi![/INST]Hello.</s>[INST]You are helpful.\n\nBye[/INST]");
        QTest::newRow("deepseek v3")
            << QByteArray(kDeepSeekV3Source) << 2 << true
            << QByteArray("<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>You are helpful.<\xEF\xBD\x9CUser\xEF\xBD\x9C>Hi!"
                          "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>Hello.<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
                          "<\xEF\xBD\x9CUser\xEF\xBD\x9C>Bye<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>");
        QTest::newRow("deepseek r1 thinking")
            << QByteArray(kDeepSeekR1Source) << 3 << true
            << QByteArray("<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C><\xEF\xBD\x9CUser\xEF\xBD\x9C>Hi!"
                          "<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>\n\nHello.<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>"
                          "<\xEF\xBD\x9CUser\xEF\xBD\x9C>Bye<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C><think>\n");
        QTest::newRow("phi4") << QByteArray(kPhi4Source) << 2 << true
                              << QByteArray("<|im_start|>system<|im_sep|>You are helpful.<|im_end|><|im_start|>user<|im_sep|>Hi!"
                                            "<|im_end|><|im_start|>assistant<|im_sep|>Hello.<|im_end|><|im_start|>user<|im_sep|>Bye"
                                            "<|im_end|><|im_start|>assistant<|im_sep|>");
        QTest::newRow("llama4") << QByteArray(kLlama4Source) << 2 << true
                                << QByteArray("<|begin_of_text|><|header_start|>system<|header_end|>\n\nYou are helpful.<|eot|>"
                                              "<|header_start|>user<|header_end|>\n\nHi!<|eot|><|header_start|>assistant<|header_end|>"
                                              "\n\nHello.<|eot|><|header_start|>user<|header_end|>\n\nBye<|eot|>"
                                              "<|header_start|>assistant<|header_end|>\n\n");
        QTest::newRow("phi4 mini") << QByteArray(kPhi4MiniSource) << 2 << true
                                   << QByteArray("<|system|>You are helpful.<|end|><|user|>Hi!<|end|><|assistant|>Hello.<|end|>"
                                                 "<|user|>Bye<|end|><|assistant|>");
        QTest::newRow("phi4 mini no prompt") << QByteArray(kPhi4MiniSource) << 2 << false
                                             << QByteArray("<|system|>You are helpful.<|end|><|user|>Hi!<|end|><|assistant|>"
                                                           "Hello.<|end|><|user|>Bye<|end|><|endoftext|>");
        QTest::newRow("plain") << QByteArray() << 0 << true << QByteArray("System: You are helpful.\nUser: Hi!\nAssistant:");
        QTest::newRow("plain turns") << QByteArray() << 2 << false
                                     << QByteArray("System: You are helpful.\nUser: Hi!\nAssistant: Hello.\nUser: Bye\n");
        // Families whose templates write today's date or a default system prompt: {FORMAT} stands where the
        // template writes strftime_now(FORMAT). Rendered from the abridged sources by Jinja2 set up as HF
        // transformers does (trim_blocks, lstrip_blocks, strftime_now).
        QTest::newRow("kMistralSmall3Source 2 gen") << QByteArray(kMistralSmall3Source) << 2 << true
            << QByteArray("<s>[SYSTEM_PROMPT]You are helpful.[/SYSTEM_PROMPT][INST]Hi![/INST]Hello.</s>[INST]Bye[/INST]");
        QTest::newRow("kMistralSmall3Source 3 gen") << QByteArray(kMistralSmall3Source) << 3 << true
            << QByteArray("<s>[SYSTEM_PROMPT]You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI.\nThe current da"
                "te is {%Y-%m-%d}.[/SYSTEM_PROMPT][INST]Hi![/INST]<think>\nThe user greets.\n</think>\n\nHello.</s>[INST]Bye[/I"
                "NST]");
        QTest::newRow("kMistralLargeV7Source 2 gen") << QByteArray(kMistralLargeV7Source) << 2 << true
            << QByteArray("<s>[SYSTEM_PROMPT] You are helpful.[/SYSTEM_PROMPT][INST] Hi![/INST] Hello.</s>[INST] Bye[/INST]");
        QTest::newRow("kGptOssSource 2 gen") << QByteArray(kGptOssSource) << 2 << true
            << QByteArray("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-0"
                "6\nCurrent date: {%Y-%m-%d}\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel mus"
                "t be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nYou are helpful.\n\n<|en"
                "d|><|start|>user<|message|>Hi!<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|end|><|start|>user<|"
                "message|>Bye<|end|><|start|>assistant");
        QTest::newRow("kGptOssSource 2") << QByteArray(kGptOssSource) << 2 << false
            << QByteArray("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-0"
                "6\nCurrent date: {%Y-%m-%d}\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel mus"
                "t be included for every message.<|end|><|start|>developer<|message|># Instructions\n\nYou are helpful.\n\n<|en"
                "d|><|start|>user<|message|>Hi!<|end|><|start|>assistant<|channel|>final<|message|>Hello.<|end|><|start|>user<|"
                "message|>Bye<|end|>");
        QTest::newRow("kGptOssSource 3 gen") << QByteArray(kGptOssSource) << 3 << true
            << QByteArray("<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\nKnowledge cutoff: 2024-0"
                "6\nCurrent date: {%Y-%m-%d}\n\nReasoning: medium\n\n# Valid channels: analysis, commentary, final. Channel mus"
                "t be included for every message.<|end|><|start|>user<|message|>Hi!<|end|><|start|>assistant<|channel|>final<|m"
                "essage|><think>\nThe user greets.\n</think>\n\nHello.<|end|><|start|>user<|message|>Bye<|end|><|start|>assista"
                "nt");
        QTest::newRow("kGranite3Source 3 gen") << QByteArray(kGranite3Source) << 3 << true
            << QByteArray("<|start_of_role|>system<|end_of_role|>Knowledge Cutoff Date: April 2024. Today's Date: {%B %d, %Y}. You are Gr"
                "anite, developed by IBM. You are a helpful AI assistant.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>H"
                "i!<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|><think>\nThe user greets.\n</think>\n\nHello.<|end"
                "_of_text|>\n<|start_of_role|>user<|end_of_role|>Bye<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
        QTest::newRow("kGranite4Source 2 gen") << QByteArray(kGranite4Source) << 2 << true
            << QByteArray("<|start_of_role|>system<|end_of_role|>You are helpful.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi!"
                "<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>Hello.<|end_of_text|>\n<|start_of_role|>user<|end_of"
                "_role|>Bye<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
        QTest::newRow("kGranite4Source 3 gen") << QByteArray(kGranite4Source) << 3 << true
            << QByteArray("<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are professional, a"
                "ccurate, and safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi!<|end_of_text|>\n<|start_of_role|>as"
                "sistant<|end_of_role|><think>\nThe user greets.\n</think>\n\nHello.<|end_of_text|>\n<|start_of_role|>user<|end"
                "_of_role|>Bye<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>");
        QTest::newRow("kGemma4Source 2 gen") << QByteArray(kGemma4Source) << 2 << true
            << QByteArray("<bos><|turn>system\nYou are helpful.<turn|>\n<|turn>user\nHi!<turn|>\n<|turn>model\nHello.<turn|>\n<|turn>user"
                "\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
        QTest::newRow("kGemma4Source 3 gen") << QByteArray(kGemma4Source) << 3 << true
            << QByteArray("<bos><|turn>user\nHi!<turn|>\n<|turn>model\n<think>\nThe user greets.\n</think>\n\nHello.<turn|>\n<|turn>user"
                "\nBye<turn|>\n<|turn>model\n<|channel>thought\n<channel|>");
        QTest::newRow("kQwen35Source 3 gen") << QByteArray(kQwen35Source) << 3 << true
            << QByteArray("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|i"
                "m_start|>assistant\n<think>\n");
        QTest::newRow("kLlama3FirstSource 5") << QByteArray(kLlama3FirstSource) << 5 << false
            << QByteArray(
                "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|><|start_header_id|>assistant<|end_he"
                "ader_id|>\n\nHello.<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
        QTest::newRow("kQwen3LastQuerySource 3 gen") << QByteArray(kQwen3LastQuerySource) << 3 << true
            << QByteArray(
                "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|i"
                "m_start|>assistant\n");
        QTest::newRow("kQwen3LastQuerySource 4") << QByteArray(kQwen3LastQuerySource) << 4 << false
            << QByteArray(
                "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\nThe user greets.\n</think>\n\nHello.<|im_end|"
                ">\n");
        QTest::newRow("kQwen3LastQuerySource 5") << QByteArray(kQwen3LastQuerySource) << 5 << false
            << QByteArray(
                "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello.<|im_end|>\n");
        QTest::newRow("kQwQSource 3 gen") << QByteArray(kQwQSource) << 3 << true
            << QByteArray(
                "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n<|i"
                "m_start|>assistant\n<think>\n");
        QTest::newRow("kQwQSource 4") << QByteArray(kQwQSource) << 4 << false
            << QByteArray(
                "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\nThe user greets.\n</think>\n\nHello.<|im_end|"
                ">\n");
        QTest::newRow("kDeepSeekR1FirstSource 3 gen") << QByteArray(kDeepSeekR1FirstSource) << 3 << true
            << QByteArray(
                "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C><\xEF\xBD\x9CUser\xEF\xBD\x9C>Hi!<"
                "\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>\n\nHello.<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence"
                "\xEF\xBD\x9C><\xEF\xBD\x9CUser\xEF\xBD\x9C>Bye<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C>");
        QTest::newRow("kDeepSeekV31Source 2 gen") << QByteArray(kDeepSeekV31Source) << 2 << true
            << QByteArray(
                "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>You are helpful.<\xEF\xBD\x9CUser"
                "\xEF\xBD\x9C>Hi!<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C></think>Hello.<\xEF\xBD\x9C" "end\xE2\x96\x81of"
                "\xE2\x96\x81sentence\xEF\xBD\x9C><\xEF\xBD\x9CUser\xEF\xBD\x9C>Bye<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C></thin"
                "k>");
        QTest::newRow("kDeepSeekV31Source 3 gen") << QByteArray(kDeepSeekV31Source) << 3 << true
            << QByteArray(
                "<\xEF\xBD\x9C" "begin\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C><\xEF\xBD\x9CUser\xEF\xBD\x9C>Hi!<"
                "\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C></think>\n\nHello.<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence"
                "\xEF\xBD\x9C><\xEF\xBD\x9CUser\xEF\xBD\x9C>Bye<\xEF\xBD\x9C" "Assistant\xEF\xBD\x9C></think>");
        QTest::newRow("kGranite4EmptySystemSource 6 gen") << QByteArray(kGranite4EmptySystemSource) << 6 << true
            << QByteArray(
                "<|start_of_role|>system<|end_of_role|>You are a helpful assistant. Please ensure responses are professional, a"
                "ccurate, and safe.<|end_of_text|>\n<|start_of_role|>user<|end_of_role|>Hi!<|end_of_text|>\n<|start_of_role|>as"
                "sistant<|end_of_role|>");
        QTest::newRow("phi3 no prompt") << QByteArray(kPhi3Source) << 2 << false
                                        << QByteArray("<|system|>\nYou are helpful.<|end|>\n<|user|>\nHi!<|end|>\n<|assistant|>\n"
                                                      "Hello.<|end|>\n<|user|>\nBye<|end|>\n<|endoftext|>");
        QTest::newRow("mistral nemo empty system") << QByteArray(kNemoSource) << 6 << true << QByteArray("<s>[INST]\n\nHi![/INST]");
    }

    void render() {
        QFETCH(QByteArray, source);
        QFETCH(int, conversation);
        QFETCH(bool, generation_prompt);
        QFETCH(QByteArray, expected);
        std::string want = expected.toStdString();
        for (size_t open = want.find("{%"); open != std::string::npos; open = want.find("{%", open)) {
            const size_t close = want.find('}', open);
            const std::string today = kvscope::local_time_string(want.substr(open + 1, close - open - 1).c_str());
            want.replace(open, close - open + 1, today);
            open += today.size();
        }
        const std::vector<ChatMessage>* const conversations[] = {&kSystemUser, &kUser, &kTurns, &kThinkingTurns,
                                                                 &kAnsweredThinking, &kAnswered, &kEmptySystem};
        const auto& messages = *conversations[conversation];
        const ChatTemplate t = ChatTemplate::detect(source.toStdString());
        QCOMPARE(t.render(messages, generation_prompt), want);
    }

    // Llama 3.2's templates date the system turn today where the renderer has strftime_now, as HF
    // transformers (and so vLLM) does.
    void llama32DatesToday() {
        const std::string today = kvscope::local_time_string("%d %b %Y");
        const std::string text = ChatTemplate::detect(std::string(kLlama31Source) + kLlama32DateSource).render(kUser, true);
        QVERIFY2(text.find(std::string("Today Date: ") + today + "\n\n") != std::string::npos, text.c_str());
    }

    // Gemma 3's published template, as the model carries it: recognised as gemma, and rendered as that
    // template renders (worked through by hand): the system text untouched before the first user turn, every
    // turn's content trimmed, the assistant as "model".
    void gemma3_template() {
        const ChatTemplate t = ChatTemplate::detect(kGemma3Source);
        QCOMPARE(t.family(), std::string("gemma"));
        const std::vector<ChatMessage> messages = {
            {"system", " Answer briefly.\n"}, {"user", "  Hi!\n"}, {"assistant", "Hello. "}, {"user", "Bye"}};
        QCOMPARE(t.render(messages, true),
                 std::string("<bos><start_of_turn>user\n Answer briefly.\n\n\nHi!<end_of_turn>\n"
                             "<start_of_turn>model\nHello.<end_of_turn>\n<start_of_turn>user\nBye<end_of_turn>\n"
                             "<start_of_turn>model\n"));
        QCOMPARE(t.render({{"user", "Hi!"}}, false), std::string("<bos><start_of_turn>user\nHi!<end_of_turn>\n"));
    }

    // vLLM's chat request fields: enable_thinking where the template reads it, continue_final_message.
    void renderOptions() {
        kvscope::ChatRenderOptions off;
        off.enable_thinking = false;
        QCOMPARE(ChatTemplate::detect(kQwen3Source).render(kUser, off),
                 std::string("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
        QCOMPARE(ChatTemplate::detect(kQwen35Source).render(kUser, off),
                 std::string("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
        kvscope::ChatRenderOptions on;
        on.enable_thinking = true;
        QCOMPARE(ChatTemplate::detect(kQwen3Source).render(kUser, on), ChatTemplate::detect(kQwen3Source).render(kUser, true));
        QCOMPARE(ChatTemplate::detect(kQwQSource).render(kUser, off), ChatTemplate::detect(kQwQSource).render(kUser, true));
        // continue_final_message: cut after the final content, its leading white space kept as written, its
        // trailing white space only where the template kept it (HF's apply_chat_template).
        kvscope::ChatRenderOptions go_on;
        go_on.add_generation_prompt = false;
        go_on.continue_final_message = true;
        QCOMPARE(ChatTemplate::detect(kLlama3Source).render({{"user", "Hi!"}, {"assistant", "  Well, "}}, go_on),
                 std::string("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
                             "<|start_header_id|>assistant<|end_header_id|>\n\nWell,"));
        QCOMPARE(ChatTemplate::detect(kChatMlSource).render({{"user", "Hi!"}, {"assistant", "Well, "}}, go_on),
                 std::string("<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\nWell, "));
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, ChatTemplate::detect(kChatMlSource).render(kUser, [] {
            kvscope::ChatRenderOptions both;
            both.continue_final_message = true;
            return both;
        }()));
    }

    void bos_contract() {
        QVERIFY(ChatTemplate::of_family("llama3").renders_bos());
        QVERIFY(ChatTemplate::of_family("llama2").renders_bos());
        QVERIFY(ChatTemplate::of_family("mistral").renders_bos());
        QVERIFY(ChatTemplate::of_family("gemma").renders_bos());
        QVERIFY(ChatTemplate::of_family("gemma4").renders_bos());
        QVERIFY(ChatTemplate::of_family("llama4").renders_bos());
        QVERIFY(ChatTemplate::of_family("mistral-v7").renders_bos());
        QVERIFY(!ChatTemplate::of_family("gpt-oss").renders_bos());
        QVERIFY(!ChatTemplate::of_family("granite").renders_bos());
        QVERIFY(!ChatTemplate::of_family("qwen3").renders_bos());
        QVERIFY(!ChatTemplate::of_family("phi3").renders_bos());
        QVERIFY(!ChatTemplate::of_family("phi4").renders_bos());
        QVERIFY(!ChatTemplate::of_family("phi4-mini").renders_bos());
        QVERIFY(!ChatTemplate::of_family("chatml").renders_bos());
        QVERIFY(!ChatTemplate::of_family("zephyr").renders_bos());
        QVERIFY(!ChatTemplate::of_family("plain").renders_bos());
        QVERIFY_THROWS_EXCEPTION(kvscope::BadInput, ChatTemplate::of_family("jinja"));
    }

    // A chat_template in tokenizer_config.json that is not a template (a number) falls back to plain with
    // the warning, as an unknown template does; it passed as "no template" without one.
    void non_string_template_warns() {
        QTemporaryDir dir;
        const std::string src = kvscope::test::models_dir() + "/stories260K-hf/";
        nlohmann::json config;
        std::ifstream(src + "tokenizer_config.json") >> config;
        config["chat_template"] = 5;
        const std::string path = dir.filePath("tokenizer_config.json").toStdString();
        std::ofstream(path) << config.dump();
        const auto tok = kvscope::Tokenizer::from_hf_files(src + "tokenizer.json", path);
        const ChatTemplate t = ChatTemplate::detect(tok.chat_template());
        QCOMPARE(QString::fromStdString(t.family()), QString("plain"));
        QVERIFY(t.unrecognized());
    }

    // Rendered text through encode: exactly one BOS either way, and the
    // template's "</s>" becomes the EOS id, not characters.
    void encode_rendered() {
        const std::string dir = kvscope::test::models_dir();
        const auto tok = kvscope::Tokenizer::from_hf_files(dir + "/stories260K-hf/tokenizer.json",
                                                           dir + "/stories260K-hf/tokenizer_config.json");
        for (const char* family : {"llama2", "zephyr", "plain", "mistral"}) {
            const ChatTemplate t = ChatTemplate::of_family(family);
            const auto ids = tok.encode(t.render(kTurns, true), !t.renders_bos());
            QCOMPARE(ids.at(0), 1);
            QVERIFY2(ids.at(1) != 1, family);
        }
        const auto zephyr = tok.encode(ChatTemplate::of_family("zephyr").render(kUser, true), true);
        QCOMPARE(std::count(zephyr.begin(), zephyr.end(), 2), 1);
    }
};

QTEST_GUILESS_MAIN(TestChatTemplate)
#include "test_chat_template.moc"

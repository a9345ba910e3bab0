# Test set-up for the chat-template conformance and fuzz tests (run with cmake -P):
# clones llama.cpp from the git bundle node-llama-cpp ships, takes its models/templates/*.jinja,
# and renders every (template, conversation) with @huggingface/jinja into REFS, and generated
# expression templates into EXPRESSION_REFS.
# Any missing piece (node, the npm packages, the bundle) is an error: these tests never skip.
#   -DORACLE_DIR=<tests/oracle> -DWORK_DIR=<build folder> -DREFS=<refs.json>
#   -DEXPRESSION_REFS=<refs.json> -DNODE=<node or empty>
foreach(var ORACLE_DIR WORK_DIR REFS EXPRESSION_REFS)
  if(NOT ${var})
    message(FATAL_ERROR "make_references.cmake: ${var} is not set")
  endif()
endforeach()
if(NOT NODE)
  message(FATAL_ERROR "node was not found when configuring; it is needed to run @huggingface/jinja as the reference")
endif()
set(bundle ${ORACLE_DIR}/node_modules/node-llama-cpp/llama/gitRelease.bundle)
if(NOT EXISTS ${bundle})
  message(FATAL_ERROR "${bundle} is missing: run `cd ${ORACLE_DIR} && ONNXRUNTIME_NODE_INSTALL=skip npm ci --omit=optional --ignore-scripts`")
endif()
if(NOT EXISTS ${ORACLE_DIR}/node_modules/@huggingface/jinja/package.json)
  message(FATAL_ERROR "@huggingface/jinja is not installed in ${ORACLE_DIR}/node_modules")
endif()
find_program(GIT git REQUIRED)
set(checkout ${WORK_DIR}/llama.cpp)
if(NOT EXISTS ${checkout}/models/templates)
  file(REMOVE_RECURSE ${checkout})
  execute_process(COMMAND ${GIT} clone --quiet ${bundle} ${checkout} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "git clone ${bundle} failed: ${err}")
  endif()
endif()
execute_process(COMMAND ${NODE} ${ORACLE_DIR}/chat_template_render.mjs --templates ${checkout}/models/templates --out ${REFS}
                WORKING_DIRECTORY ${ORACLE_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "chat_template_render.mjs failed (exit ${rc})")
endif()
execute_process(COMMAND ${NODE} ${ORACLE_DIR}/chat_template_expressions.mjs --out ${EXPRESSION_REFS}
                WORKING_DIRECTORY ${ORACLE_DIR} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "chat_template_expressions.mjs failed (exit ${rc})")
endif()

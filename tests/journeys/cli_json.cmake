# Journey (issue 51): every pithctl command with --json prints one JSON
# document, [] or {} when empty, and errors stay one line on stderr; the
# exact output of `pithctl resolve 2401.14489` and its --json.
add_test(NAME journey_cli_json
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/cli_json.py
          --pithctl $<TARGET_FILE:pithctl> --pithd $<TARGET_FILE:pithd>
          --data ${JOURNEY_DIR}/../data --conformance ${JOURNEY_DIR}/../conformance
          --out ${JOURNEY_OUT})
set_tests_properties(journey_cli_json PROPERTIES LABELS journey TIMEOUT 120)

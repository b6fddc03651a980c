# Journey (issue 51): `pithctl replicate URL` from the HTTPS stand-in, on a
# terminal and on a pipe, interrupted by Ctrl-C and by SIGKILL, resumed from
# its cursor, ending identical; the upstream grows (--once, then followed);
# pithd serves the replica and follows on from the same cursor; the
# mistakes end in one line each. The stand-in needs python3-cryptography.
add_test(NAME journey_replicate
  COMMAND ${Python3_EXECUTABLE} ${JOURNEY_DIR}/replicate.py
          --pithctl $<TARGET_FILE:pithctl> --pithd $<TARGET_FILE:pithd>
          --gen-events $<TARGET_FILE:gen_events>
          --gen-bundles $<TARGET_FILE:gen_bundles> --out ${JOURNEY_OUT})
set_tests_properties(journey_replicate PROPERTIES LABELS journey TIMEOUT 180)

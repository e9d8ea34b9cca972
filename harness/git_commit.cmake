# Run at every build (the ssd_git_commit target, harness/CMakeLists.txt), not at configure:
# a commit read once at configure time stayed in every later build of the tree, so result files
# named a commit that was not the code that made them. Writes git_commit.h only when the commit
# changes, so an unchanged tree recompiles nothing.
#   cmake -DSOURCE_DIR=<repository> -DOUTPUT=<git_commit.h> -P git_commit.cmake
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE commit OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT commit)
  set(commit "unknown")
elseif(dirty)
  set(commit "${commit}-dirty")
endif()
file(CONFIGURE OUTPUT ${OUTPUT}
     CONTENT "// Generated at build time by harness/git_commit.cmake: the commit this binary was built from.\n#pragma once\n#define SSD_GIT_COMMIT \"${commit}\"\n"
     @ONLY)
